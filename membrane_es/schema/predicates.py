"""Which predicates hold one value at a time, and which many: a store's predicate vocabulary.

Resolution on write (:mod:`membrane_es.commands.resolution`) asks it what a new fact with
the subject and predicate of an active one, but another object, means:

* **single-valued** (``city``, ``employer``, ``deploy_target``, ``budget``…): the new value
  replaces the old one — the old record is superseded, with a rationale saying so, and stays
  readable ``as_of`` and in ``history``;
* **many-valued** (``likes``, ``knows``, ``speaks``…): both are true, both stay;
* **unknown**: both stay (nothing is retracted on a guess), the answer names the other value
  (``kept_alongside``), and reads rank the newer first as they rank any newer record. An
  interpreter with a ``reconcile`` method may decide instead
  (:class:`~membrane_es.commands.interpreter.Reconciler`).

Predicates are compared normalised (:func:`~membrane_es.schema.fact_keys.normal_predicate`:
``Deploy target`` is ``deploy_target``). A store's vocabulary is the built-in one with what
its options add (``EngineOptions.single_valued`` / ``many_valued``), and what is declared
later (``Membrane.declare_predicates``); a later declaration of a predicate wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from membrane_es.errors import ValidationError
from membrane_es.schema.fact_keys import normal_predicate

SINGLE = "single"
MANY = "many"
UNKNOWN = "unknown"

BUILTIN_SINGLE_VALUED = frozenset(
    {
        "address",
        "age",
        "birthday",
        "budget",
        "city",
        "country",
        "current_project",
        "deadline",
        "deploy_target",
        "diet",
        "due_date",
        "email",
        "employer",
        "home",
        "job_title",
        "lives_in",
        "location",
        "manager",
        "owner",
        "phone",
        "preferred_language",
        "priority",
        "reports_to",
        "role",
        "spouse",
        "status",
        "timezone",
        "title",
        "version",
        "works_at",
    }
)
BUILTIN_MANY_VALUED = frozenset(
    {
        "allergic_to",
        "dislikes",
        "friend_of",
        "has_skill",
        "hobby",
        "interested_in",
        "knows",
        "likes",
        "member_of",
        "owns",
        "speaks",
        "uses",
        "visited",
        "works_with",
    }
)


@dataclass(frozen=True)
class PredicateVocabulary:
    """Normalised predicate → ``single`` or ``many``; anything else is ``unknown``."""

    kinds: dict[str, str] = field(default_factory=dict)

    @classmethod
    def builtin(cls) -> PredicateVocabulary:
        kinds = dict.fromkeys(BUILTIN_SINGLE_VALUED, SINGLE)
        kinds.update(dict.fromkeys(BUILTIN_MANY_VALUED, MANY))
        return cls(kinds)

    def kind(self, predicate: str) -> str:
        """``single``, ``many`` or ``unknown``."""
        return self.kinds.get(normal_predicate(predicate), UNKNOWN)

    def declared(
        self, *, single: Iterable[str] = (), many: Iterable[str] = ()
    ) -> PredicateVocabulary:
        """This vocabulary with ``single`` and ``many`` declared (a predicate in both is
        refused; each is checked and normalised)."""
        singles = _predicates("single_valued", single)
        manys = _predicates("many_valued", many)
        both = sorted(set(singles) & set(manys))
        if both:
            raise ValidationError(
                "many_valued", f"{both[0]!r} is declared single-valued and many-valued at once"
            )
        kinds = dict(self.kinds)
        kinds.update(dict.fromkeys(singles, SINGLE))
        kinds.update(dict.fromkeys(manys, MANY))
        return PredicateVocabulary(kinds)

    def listed(self) -> dict[str, list[str]]:
        """``{"single": [...], "many": [...]}``, each sorted."""
        return {
            kind: sorted(p for p, k in self.kinds.items() if k == kind) for kind in (SINGLE, MANY)
        }


def _predicates(field_name: str, values: Iterable[str]) -> list[str]:
    if isinstance(values, str | bytes):
        raise ValidationError(field_name, "must be a list of predicates, not a string")
    found = []
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise ValidationError(f"{field_name}[{i}]", "must be a predicate (text)")
        name = normal_predicate(value)
        if not name:
            raise ValidationError(f"{field_name}[{i}]", "must not be blank")
        found.append(name)
    return found
