"""The daemon's actors: who exists, what each owns and what it needs first.

The one table of them, read by the daemon (and by tests and benchmarks that
run the same actors without a daemon); the supervisor starts them in
dependency order. Their names and their pools' families are the daemon's
own: no component may take one, and each has its restart series from the
start.
"""

from __future__ import annotations

from enact.actors import accounting, journal, memory, outbox, reviews, scanner, scheduler, sessions, tasks, worker
from enact.actors.accounting import AccountingActor
from enact.actors.curator import DATABASES as CURATOR_DATABASES
from enact.actors.curator import CuratorActor
from enact.actors.epoch import EpochFenceActor
from enact.actors.inbox import CONVERSATIONS, InboxActor
from enact.actors.journal import JournalActor
from enact.actors.memory import MemoryActor
from enact.actors.outbox import OutboxActor
from enact.actors.reviews import ReviewsActor
from enact.actors.scanner import ScannerActor
from enact.actors.scheduler import SchedulerActor
from enact.actors.sessions import SessionsActor
from enact.actors.supervisor import ActorSpec
from enact.actors.tasks import TaskQueueActor
from enact.actors.worker import WorkersActor
from enact.chat import inbox_records
from enact.chat.services import ChatServices
from enact.messages.reviews import Landed
from enact.messages.tasks import TaskChanged


def actor_specs(services: ChatServices) -> list[ActorSpec]:
    """Every actor of the daemon and what it owns."""
    return [
        ActorSpec(name="epoch", actor=EpochFenceActor),
        ActorSpec(name="journal", actor=JournalActor, databases=(journal.DATABASE,), depends_on=("epoch",)),
        ActorSpec(
            name="sessions",
            actor=SessionsActor,
            databases=(sessions.SESSIONS, sessions.HISTORIES),
            depends_on=("epoch",),
        ),
        ActorSpec(name="accounting", actor=AccountingActor, databases=(accounting.DATABASE,), depends_on=("epoch",)),
        ActorSpec(
            name="outbox",
            actor=OutboxActor,
            databases=outbox.DATABASES,
            depends_on=("epoch",),
            options={"channels": services.channels},
        ),
        ActorSpec(name="memory", actor=MemoryActor, databases=memory.DATABASES, depends_on=("epoch",)),
        ActorSpec(
            name="inbox",
            actor=InboxActor,
            databases=inbox_records.DATABASES,
            depends_on=("epoch", "journal", "sessions", "outbox", "memory"),
            options={"services": services},
            pools=(CONVERSATIONS,),
        ),
        ActorSpec(
            name="tasks",
            actor=TaskQueueActor,
            databases=tasks.DATABASES,
            depends_on=("epoch", "inbox"),  # it tells the inbox its owner notices, at start too
            options={"agentic": services.runtime.capabilities.agentic},
        ),
        ActorSpec(name="reviews", actor=ReviewsActor, databases=reviews.DATABASES, depends_on=("epoch",)),
        # The evolve schedule asks the scanner, the curator, memory and the inbox.
        ActorSpec(name="scheduler", actor=SchedulerActor, databases=scheduler.DATABASES,
                  depends_on=("epoch", "tasks", "scanner", "curator", "memory", "inbox")),
        ActorSpec(
            name="workers",
            actor=WorkersActor,
            depends_on=("epoch", "tasks", "reviews"),
            options={"runtime": services.runtime},
            subscribes=(TaskChanged,),
            pools=(worker.FAMILY,),
        ),
        ActorSpec(
            name="scanner",
            actor=ScannerActor,
            databases=scanner.DATABASES,
            depends_on=("epoch", "inbox", "tasks"),
            options={"runtime": services.runtime},
        ),
        ActorSpec(
            name="curator",
            actor=CuratorActor,
            databases=CURATOR_DATABASES,
            depends_on=("epoch", "tasks", "reviews", "scanner"),
            options={"runtime": services.runtime},
            subscribes=(TaskChanged, Landed),
        ),
    ]
