"""What the tests and bench/ share, one importable package beside the product
(never imported by sparkscope itself): a throwaway stack on free ports, the
models of Grafana 12's queries and alerting, a Graphite tap, fakes of outside
programs, a slow FUSE disk."""
