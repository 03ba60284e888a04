"""What sparkscope stores and how it gets there and back: the typed schema
(schema.py), line protocol (lineprotocol.py), the HTTP transport and the
InfluxDB client (http.py, influx.py), the profiles' nested-set rows
(nested_set.py, profiles.py), and the read layer over them.

Standard library only, and importing nothing of sparkscope but itself and
sparkscope.errors: the host probes' images copy it whole
(tests/test_layers.py holds it).
"""
