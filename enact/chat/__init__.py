"""The chat path's plain logic, fronted by the inbox, outbox and conversation actors."""
