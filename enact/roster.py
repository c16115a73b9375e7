"""The daemon's actors: who exists, what each owns and what it needs first.

The one table of them, read by the daemon (and by tests and benchmarks that
run the same actors without a daemon); the supervisor starts them in
dependency order. Their names and their pools' families are the daemon's
own: no component may take one, and each has its restart series from the
start.
"""

from __future__ import annotations

from enact.actors.supervisor import ActorSpec
from enact.chat import inbox_records
from enact.chat import journal_actor as journal
from enact.chat import outbox_actor as outbox
from enact.chat import sessions_actor as sessions
from enact.chat.inbox_actor import CONVERSATIONS, InboxActor
from enact.chat.journal_actor import JournalActor
from enact.chat.outbox_actor import OutboxActor
from enact.chat.services import ChatServices
from enact.chat.sessions_actor import SessionsActor
from enact.epoch_actor import EpochFenceActor
from enact.evolution import scanner_actor as scanner
from enact.evolution.curator_actor import DATABASES as CURATOR_DATABASES
from enact.evolution.curator_actor import CuratorActor
from enact.evolution.evolve_actor import DATABASES as EVOLVE_DATABASES
from enact.evolution.evolve_actor import EvolveActor
from enact.evolution.scanner_actor import ScannerActor
from enact.memory import memory_actor as memory
from enact.memory.memory_actor import MemoryActor
from enact.messages.reviews import Landed
from enact.messages.tasks import TaskChanged
from enact.runtime import accounting_actor as accounting
from enact.runtime.accounting_actor import AccountingActor
from enact.tasks import queue_actor as tasks
from enact.tasks import reviews_actor as reviews
from enact.tasks import scheduler_actor as scheduler
from enact.tasks import workers_actor as worker
from enact.tasks.queue_actor import TaskQueueActor
from enact.tasks.reviews_actor import ReviewsActor
from enact.tasks.scheduler_actor import SchedulerActor
from enact.tasks.workers_actor import WorkersActor


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
        ActorSpec(name="scheduler", actor=SchedulerActor, databases=scheduler.DATABASES, depends_on=("epoch", "tasks")),
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
        # The evolve run asks the scanner, the curator, memory and the inbox.
        ActorSpec(name="evolve", actor=EvolveActor, databases=EVOLVE_DATABASES,
                  depends_on=("epoch", "scanner", "curator", "memory", "inbox")),
    ]
