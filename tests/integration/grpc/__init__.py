"""The daemon over loopback, with clients generated from our proto."""
