"""Evolution: enact studies its own turns and tasks and proposes bounded
improvements to itself, which a person approves before they become tasks.
Plain logic, testable without threads; the actors are thin fronts over it."""
