"""The read model as an eventsourcing projection: driven by eventsourcing's own subscription to
the LMDB log (events pushed as they are recorded, each with its tracking position), it reaches
the same views as the engine's own read model."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from eventsourcing.projection import ApplicationSubscription

from membrane_es import Membrane
from membrane_es.embedding import HashingEmbedder
from membrane_es.projections.read_model import ReadModel
from tests.views_support import assert_same_views, random_history


def test_a_subscription_drives_the_same_views(tmp_path: Path) -> None:
    with Membrane.open(tmp_path, sync=False, embedder=HashingEmbedder(32)) as memory:
        random_history(memory, random.Random(4), 40)
        app = memory.application
        head = app.recorder.max_notification_id()
        assert head
        follower = ReadModel()
        with ApplicationSubscription(app, gt=0) as subscription:
            for event, tracking in itertools.islice(subscription, head):
                follower.process_event(event, tracking)
                follower.process_event(event, tracking)  # delivered twice: applied once
        assert follower.position == head
        assert_same_views(memory.views, follower)
        follower.close()
