"""Skills: folders with a ``SKILL.md`` the owner lets enact learn, checked,
assessed and installed into ``<home>/skills`` only on the owner's approval."""
