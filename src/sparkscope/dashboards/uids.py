"""Dashboard uids: the URLs /d/<uid> that links, the demo and the tests use."""

LIVE_UID = "sparkscope-executors"
SUMMARY_UID = "sparkscope-application"
PROFILES_UID = "sparkscope-profiles"
