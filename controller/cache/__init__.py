"""The cluster's state as the controller decides on it, kept up to date one object at a time:
free capacity (`capacity`), devices, neighbours and volumes (`occupancy`), disruption budgets
(`budgets`), groups (`groups`), and the index holding them all (`index`)."""
