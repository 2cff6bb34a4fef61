"""The load generator: the served backends' streaming HTTP client, its schedules (closed loop, open
loop), its stream records and token accounting, and the client's measure of itself."""
