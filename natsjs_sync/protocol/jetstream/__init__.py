"""JetStream's protocol, without I/O: status messages and ack reply subjects."""

from .ackreply import MsgMetadata, SequencePair, Sequences, parse_metadata, sequences
from .status import Kind, Status, classify, is_no_responders

__all__ = ["Kind", "MsgMetadata", "SequencePair", "Sequences", "Status", "classify", "is_no_responders",
           "parse_metadata", "sequences"]
