"""Forms: what a person fills in instead of typing every word of a change.

``asks``: which words open a form; ``model``: a form's fields and entries, beside ``Reply``;
``views``: what each form shows; ``choices``: what a form offers and how its entries are
checked; ``flow``: a form's life from opening to its request. A platform's adapter draws the
forms and reads their entries back (Slack: ``bot/slack/modals.py``)."""
