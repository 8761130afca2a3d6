"""repdyn.runtime"""
