"""Table commits: every change is plan -> write files -> swap metadata -> retry with validation."""
