"""Idle alerts: the sweep's idle clusters told in chat, with their buttons and Home part."""
