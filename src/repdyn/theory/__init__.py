"""repdyn.theory"""
