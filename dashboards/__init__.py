"""Streamlit dashboards; they read only through the audit API."""
