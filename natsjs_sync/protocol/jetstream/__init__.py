"""JetStream's protocol, without I/O: status messages and ack reply subjects."""

from .ackreply import MsgMetadata, SequencePair, Sequences, parse_metadata, sequences
from .status import Kind, Status, classify

__all__ = ["Kind", "MsgMetadata", "SequencePair", "Sequences", "Status", "classify", "parse_metadata",
           "sequences"]
