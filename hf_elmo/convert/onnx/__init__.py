"""Exports of an ELMo encoder to other runtimes (package code only, not shipped as Hub remote code)."""

from .export import export_onnx

__all__ = ["export_onnx"]
