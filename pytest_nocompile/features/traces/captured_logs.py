"""Keep torch's structured-trace records out of pytest's log capture.

After any compile, torch logs to ``torch.__trace`` (for ``TORCH_TRACE`` and
tlparse) at DEBUG, with empty messages. That logger does not propagate, and
pytest >= 9.1 attaches its capture handlers to non-propagating loggers too,
so every failing test's "Captured log" section fills with blank
``DEBUG torch.__trace`` lines above the plugin's message. The filter sits on
pytest's handlers only: torch's own trace handler still gets every record.
"""

from __future__ import annotations

import logging

import pytest

TRACE_LOGGER = "torch.__trace"
# LoggingPlugin's handlers: the caplog fixture's, the report sections', live logging's and
# --log-file's.
_PYTEST_HANDLERS = ("caplog_handler", "report_handler", "log_cli_handler", "log_file_handler")


def _drop_trace_records(record: logging.LogRecord) -> bool:
    """Drops records of torch's structured-trace logger; lets every other record through."""
    return record.name != TRACE_LOGGER


def drop_trace_records_from_pytest_capture(config: pytest.Config) -> None:
    """Attach the filter to pytest's log-capture handlers (none with ``-p no:logging``)."""
    logging_plugin = config.pluginmanager.get_plugin("logging-plugin")
    if logging_plugin is None:
        return
    for name in _PYTEST_HANDLERS:
        handler = getattr(logging_plugin, name, None)
        if isinstance(handler, logging.Handler):
            handler.addFilter(_drop_trace_records)
