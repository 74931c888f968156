"""The spend ledger: what each pool cost while the bot watched it, at list prices (``runs``),
and its sums over any period and grouping (``totals``)."""
