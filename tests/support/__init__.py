"""What the tests (and bench/) share: a throwaway stack on free ports, Grafana's API,
a Graphite tap, fakes of outside programs."""
