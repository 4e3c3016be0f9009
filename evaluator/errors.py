"""One error tree for everything a user can cause or meet.

In: nothing. Out: exception classes. The CLI turns any `EvaluatorError` into one line
on stderr (`error: <message>`) and exit code 2. Anything else is a bug (or a model that
raised): still one line and exit 2, with the traceback written to a file that the line
names. Exit code 1 is only ever the verdict that `--fail-on` rejects.
Messages say what was expected and how to fix it, in one sentence, and name the option
the user typed. Raise them `from` the exception that caused them, so the traceback file
keeps the cause.
"""


class EvaluatorError(Exception):
    """Base of every error the CLI reports as one line (exit code 2)."""


class ConfigError(EvaluatorError):
    """Bad command-line option or setting."""


class ModelLoadError(EvaluatorError):
    """The model spec names nothing loadable, or its factory failed."""


class UnknownFamilyError(ConfigError):
    """A kernel family that the registry does not know."""


class ChecklistError(EvaluatorError):
    """A checklist file is missing or does not validate."""


class UpstreamError(EvaluatorError):
    """The upstream (or fork) repository cannot be read."""


class BaselineError(EvaluatorError):
    """The baseline store cannot be read or written as asked."""


class KernelError(EvaluatorError):
    """A kernel could not be built or run; recorded as data by the tuning stage."""


class ReportError(EvaluatorError):
    """The report could not be rendered."""


class DeviceError(EvaluatorError):
    """The requested device is not available on this machine."""
