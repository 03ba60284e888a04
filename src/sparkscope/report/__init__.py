"""`./sparkscope report`: how much memory a run really needed, advice with
--conf lines, and one self-contained HTML page of plots."""
