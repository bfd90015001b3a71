"""Alerts: rules in the settings, an engine with hysteresis fed the fleet's snapshots, the
journal and a webhook (``rules``, ``conditions``, ``engine``, ``webhook``, ``runner``)."""
