"""The kvweb front end: a Panel shell around one view per lab. Views only render traces."""
