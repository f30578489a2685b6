"""The training command's one error type, below every other training module."""


class TrainError(ValueError):
    """Bad or contradictory command-line input; the message is the one line the user sees."""
