"""Apply progress, verify report, throughput verdict; the profile picker."""
