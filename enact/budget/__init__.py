"""Spending budgets: tokens a day per purpose and in total, held by every
runtime call (``enact.runtime.metered``) and by the background work that
would spend them. ``settings`` declares them, ``period`` says which day a
moment belongs to, ``gate`` is what callers read, ``budget_actor`` keeps the
day's ledger."""
