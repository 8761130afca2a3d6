"""repdyn.report"""
