"""What reaches the server: seeded workloads, their arrival times and production traces."""
