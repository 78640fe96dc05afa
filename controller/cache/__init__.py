"""The cluster's state as the controller decides on it, kept up to date one object at a time:
free capacity (`capacity`), devices, neighbours and volumes (`occupancy`), disruption budgets
(`budgets`), groups and their declarations (`groups`, `declared_topology`), the work that holds
capacity (`holders`), and the index holding them all (`index`). It knows nothing of what is
decided on it."""
