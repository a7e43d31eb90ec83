"""Drop-in replacement for the python-executor client's import name:
``from python_executor_client import PythonExecutorClient`` keeps working
with pyexec-client installed. See pyexec_client.compat."""

from pyexec_client.compat import ExecutionConfig, ExecutionResult, ExecutionStatus, Metadata, PythonExecutorClient

__all__ = ["PythonExecutorClient", "Metadata", "ExecutionConfig", "ExecutionResult", "ExecutionStatus"]
