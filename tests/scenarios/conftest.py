# The scenario sources are fixtures, not tests of this repository: their
# stream_test.py only works inside the layout run_scenario.py builds (with
# PYTHONPATH pointing at the copies), so a pytest run over tests/ must not
# collect it from here.
collect_ignore = ["npugraph_ex"]
