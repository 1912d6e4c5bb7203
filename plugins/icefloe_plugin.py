"""Registers icefloe's Airflow plugin; the package itself is hidden from Airflow's plugin
scan by .airflowignore (see icefloe_airflow/plugin.py for why)."""

from icefloe_airflow.plugin import IcefloePlugin

__all__ = ["IcefloePlugin"]
