"""repdyn.experiments"""
