"""repdyn.data"""
