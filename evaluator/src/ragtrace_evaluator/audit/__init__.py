"""Audits: sample stored traces, label each with its failing boundary, write the labels back."""
