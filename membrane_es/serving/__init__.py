"""What every server shares: one engine per tenant, where stores may be made, where a
server listens, and the signals that stop one."""
