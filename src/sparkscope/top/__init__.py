"""`sparkscope top`: a live terminal view of one Spark run, read from InfluxDB
as the read-only user, for a terminal over ssh where no Grafana is at hand.

Built on rich (MIT): its Live display redraws a full screen in the
terminal's alternate buffer, its Text never parses what it shows as markup,
and tables and bars fit the terminal's width. textual was not taken: a whole
application framework (async event loop, CSS, widgets and their own
dependencies) for one table and a few key bindings, which a cbreak terminal
and select() on stdin do in a few lines (command.py).

data.py reads, view.py draws (a pure function of data, state and size),
command.py loops."""
