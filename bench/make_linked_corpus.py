"""Write the linked test corpus (documents joined by links) and its three question sets.

    .venv/bin/python bench/make_linked_corpus.py            # rewrites the checked-in files
    .venv/bin/python bench/make_linked_corpus.py --corpus /tmp/c --questions /tmp/q

The corpus (`bench/data/linked_corpus/`) is the engineering wiki of an invented company,
Brightmoss (an online bookshop with subscriptions): teams, people, services, datastores,
policies, runbooks, design records (ADRs), meeting notes, incident postmortems and a glossary,
linked with `[[Title]]`, `[[Title|alias]]` and relative Markdown links. Every note starts with
a level-1 heading that is its title (what `manage.py lode_import_markdown` takes as the title
and what wiki links name).

Facts are placed one or two links away from the note a question's words point at: a service
note says who is on call only as a link to its team, and only the team note has the pager
alias; a datastore note gives its backup tier and links the Backup Policy, and only the policy
has the retention per tier. The question sets (`bench/data/linked_questions/`) are written from
the same tables, so each answer is the exact sentence the generator put in the answer note.

Deterministic: a fixed seed, the standard library only, no network, no clock. Re-running it
gives byte-identical files (`tests/bench/test_linked_corpus.py` checks that).

Deliberate defects for the graph's unresolved/ambiguous handling: wiki links to pages that do
not exist (`MISSING_TITLES`), and two notes titled "Deploy Checklist" (`AMBIGUOUS_TITLE`).
Some notes name another note's exact title in plain text without linking it (unlinked
mentions).
"""

from __future__ import annotations

import argparse
import json
import posixpath
import random
import re
import shutil
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS_DIR = ROOT / "bench" / "data" / "linked_corpus"
QUESTIONS_DIR = ROOT / "bench" / "data" / "linked_questions"
SEED = 1616
MIN_WORDS, MAX_WORDS = 80, 400
MISSING_TITLES = (
    "Payments Gateway Runbook",
    "Capacity Model 2027",
    "Legacy Wiki Home",
    "Vendor Contacts",
)
AMBIGUOUS_TITLE = "Deploy Checklist"
KIND_PHRASE = {
    "Outage": "a full outage",
    "Slowdown": "a slowdown",
    "Errors": "a burst of errors",
    "Data Delay": "delayed data",
}


def slug(text: str) -> str:
    """A file name from a title: ASCII, lower case, words joined by hyphens."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


@dataclass
class Note:
    """One note being written: its path (relative to the corpus root), title and body lines."""

    path: str
    title: str
    lines: list[str] = field(default_factory=list)

    def text(self) -> str:
        body = "\n".join(self.lines).strip("\n")
        body = re.sub(r"\n{3,}", "\n\n", body)
        return f"# {self.title}\n\n{body}\n"


# --- the invented organisation --------------------------------------------------------------

PEOPLE = [
    "Priya Raman", "Tomás Ortega", "Mei Zhao", "Jonas Weber", "Aisha Bello", "Lars Nilsson",
    "Hannah Kim", "Diego Alvarez", "Fatima Khan", "Oliver Brooks", "Chloé Martin",
    "Kwame Mensah", "Sofia Rossi", "Arjun Mehta", "Nora Lindqvist", "Ethan Cole",
    "Yuki Tanaka", "Marta Nowak", "Samuel Okafor", "Ines Duarte", "Ravi Shankar",
    "Greta Hoffmann", "Leo Dubois", "Amara Eze", "Tessa Vermeer", "Omar Haddad",
]  # fmt: skip
PLACES = [
    ("Lisbon", "Europe/Lisbon"), ("Berlin", "Europe/Berlin"), ("Toronto", "America/Toronto"),
    ("Bangalore", "Asia/Kolkata"), ("Lagos", "Africa/Lagos"), ("Stockholm", "Europe/Stockholm"),
    ("Seoul", "Asia/Seoul"), ("Madrid", "Europe/Madrid"), ("Austin", "America/Chicago"),
    ("Dublin", "Europe/Dublin"), ("Warsaw", "Europe/Warsaw"), ("Tokyo", "Asia/Tokyo"),
    ("Vancouver", "America/Vancouver"), ("Amsterdam", "Europe/Amsterdam"),
]  # fmt: skip
ROLES = [
    "staff engineer", "senior engineer", "engineering manager", "site reliability engineer",
    "backend engineer", "data engineer", "principal engineer", "platform engineer",
]  # fmt: skip
INTERESTS = [
    "query planning", "incident tooling", "load testing", "observability dashboards",
    "schema migrations", "cost reviews", "mentoring new on-call engineers", "API design",
    "build speed", "queue tuning", "security reviews", "accessibility of internal tools",
]  # fmt: skip
TEAMS = [
    "Falcon", "Heron", "Otter", "Lynx", "Badger", "Kestrel",
    "Marten", "Puffin", "Wren", "Bison", "Ibis", "Vole",
]  # fmt: skip
MISSIONS = [
    "money moving through the shop: charging cards, invoices and refunds",
    "the storefront: what a visitor sees from the home page to the basket",
    "getting parcels out of the warehouse and to the carrier",
    "customer identity, sign-in and sessions",
    "the data platform that feeds finance and marketing reports",
    "the shared Kubernetes platform and the deploy pipeline",
    "messages to customers: email, SMS and push",
    "search and recommendations",
    "partner integrations and the public API",
    "trust and safety, from fraud checks to review moderation",
    "internal tools used by support and the warehouse",
    "observability: metrics, logs and traces for everyone else",
]  # fmt: skip
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]

SERVICES = [
    "Billing API", "Invoice Renderer", "Ledger Service", "Checkout Gateway", "Cart Service",
    "Catalog Search", "Recommendation Engine", "Inventory Sync", "Warehouse Bridge",
    "Shipping Quotes", "Label Printer Service", "Notification Hub", "Email Dispatcher",
    "SMS Relay", "Identity Service", "Session Broker", "Admin Console", "Warehouse Loader",
    "Metrics Gateway", "Log Shipper", "Feature Flag Service", "Pricing Engine",
    "Promotions Service", "Gift Card Service", "Review Moderation", "Image Resizer",
    "Subscription Manager", "Payout Scheduler", "Fraud Scoring", "Tax Calculator",
    "Address Validator", "Customer Profile Service", "Support Inbox", "Webhook Relay",
    "Search Indexer", "Audit Trail Service", "Export Worker", "Partner API", "Mobile Backend",
    "Returns Portal",
]  # fmt: skip
PURPOSES = [
    "takes payment requests from checkout and talks to the card processor",
    "turns orders into PDF invoices and stores them for customers to download",
    "keeps the double-entry record of every charge, refund and payout",
    "is the single entry point for the checkout flow in web and mobile",
    "holds baskets while customers shop, including baskets of signed-out visitors",
    "answers the search box on every page of the shop",
    "suggests books from reading history and what similar readers bought",
    "keeps stock levels in step with the warehouse management system",
    "translates between our order model and the warehouse's own system",
    "asks the carriers for delivery prices and dates during checkout",
    "produces carrier labels for the packing stations",
    "decides which message a customer should get and on which channel",
    "sends transactional email through our mail provider",
    "sends text messages for delivery updates and one-time codes",
    "signs customers and staff in and issues tokens",
    "stores and refreshes sessions for the web shop",
    "is the back office used by support, finance and the warehouse leads",
    "copies production data into the reporting warehouse every night",
    "receives metrics from every service and forwards them to long-term storage",
    "collects logs from every node and ships them to the log store",
    "serves feature flags and percentage rollouts to the other services",
    "computes the price of a basket, including regional price rules",
    "applies vouchers and campaign discounts",
    "issues and redeems gift cards",
    "checks customer reviews before they are published",
    "resizes cover images on upload and on first request",
    "runs the monthly book box subscriptions: renewals, pauses and skips",
    "pays authors and small publishers their share every month",
    "scores orders for fraud risk before they are accepted",
    "works out VAT and sales tax per line item",
    "checks and normalises delivery addresses",
    "stores customer profiles, preferences and consent",
    "routes customer emails into the support queue",
    "delivers our outgoing webhooks to partners, with retries",
    "keeps the search index in step with the catalog",
    "records who changed what in the back office",
    "builds CSV exports for finance and for partners",
    "is the public API partners use to list and order books",
    "is the backend-for-frontend of the iOS and Android apps",
    "lets customers start a return and print a return label",
]  # fmt: skip
# Where each service keeps its state (None: stateless).
SERVICE_STORES = {
    "Billing API": "Ledger DB", "Invoice Renderer": "Media Bucket", "Ledger Service": "Ledger DB",
    "Checkout Gateway": "Orders DB", "Cart Service": "Session Store",
    "Catalog Search": "Search Cluster", "Recommendation Engine": "Events Store",
    "Inventory Sync": "Catalog DB", "Warehouse Bridge": "Orders DB", "Shipping Quotes": None,
    "Label Printer Service": None, "Notification Hub": "Events Store", "Email Dispatcher": None,
    "SMS Relay": None, "Identity Service": "Identity DB", "Session Broker": "Session Store",
    "Admin Console": "Audit Archive", "Warehouse Loader": "Reporting Warehouse",
    "Metrics Gateway": None, "Log Shipper": None, "Feature Flag Service": None,
    "Pricing Engine": "Catalog DB", "Promotions Service": "Orders DB",
    "Gift Card Service": "Ledger DB", "Review Moderation": "Catalog DB",
    "Image Resizer": "Media Bucket", "Subscription Manager": "Orders DB",
    "Payout Scheduler": "Payouts DB", "Fraud Scoring": "Events Store", "Tax Calculator": None,
    "Address Validator": "Profiles DB", "Customer Profile Service": "Profiles DB",
    "Support Inbox": "Profiles DB", "Webhook Relay": "Events Store",
    "Search Indexer": "Search Cluster", "Audit Trail Service": "Audit Archive",
    "Export Worker": "Reporting Warehouse", "Partner API": "Orders DB", "Mobile Backend": None,
    "Returns Portal": "Orders DB",
}  # fmt: skip
LANGUAGES = ["Go", "Kotlin", "Python", "TypeScript", "Rust", "Java", "Elixir"]
DATASTORES = [
    ("Ledger DB", "PostgreSQL 16.4", 1),
    ("Orders DB", "PostgreSQL 16.4", 1),
    ("Catalog DB", "PostgreSQL 15.8", 2),
    ("Identity DB", "PostgreSQL 16.2", 1),
    ("Profiles DB", "MySQL 8.0.36", 2),
    ("Payouts DB", "PostgreSQL 15.8", 1),
    ("Session Store", "Redis 7.2", 3),
    ("Search Cluster", "OpenSearch 2.13", 3),
    ("Reporting Warehouse", "ClickHouse 24.3", 2),
    ("Media Bucket", "S3 with versioning", 3),
    ("Audit Archive", "PostgreSQL 16.2", 2),
    ("Events Store", "Cassandra 4.1", 2),
]
TIER_RETENTION = {
    1: "Tier 1: a copy every four hours plus continuous WAL archiving, retained for five weeks.",
    2: "Tier 2: one copy a night, retained for a fortnight.",
    3: "Tier 3: one copy a week, retained for two months.",
}
SEVERITIES = {
    "SEV1": "SEV1: the page must be acknowledged within 5 minutes and the status page updated "
    "within 15 minutes.",
    "SEV2": "SEV2: the page must be acknowledged within 15 minutes.",
    "SEV3": "SEV3: acknowledge within 1 hour during business hours; no page at night.",
}
CREDENTIALS = {
    "database password": "Database passwords are rotated every 90 days.",
    "third-party API key": "Third-party API keys are rotated every 180 days.",
    "token signing key": "Token signing keys are rotated every 365 days, with a two-week overlap.",
}
ADR_TOPICS = [
    ("Message Queue", ["NATS JetStream", "RabbitMQ", "Amazon SQS", "Kafka"]),
    ("Caching Layer", ["Redis with client-side TTLs", "Memcached", "an in-process LRU cache"]),
    ("API Versioning", ["version in the URL path", "a version header", "date-based versions"]),
    ("Schema Migrations", ["Flyway", "Atlas", "Alembic", "hand-written SQL files"]),
    ("Retry Strategy", ["exponential backoff with jitter", "a fixed 5-second delay"]),
    ("Rate Limiting", ["a token bucket in Redis", "limits at the load balancer", "Envoy"]),
    ("Tracing Library", ["OpenTelemetry SDK", "vendor agent", "Zipkin client"]),
    ("Job Scheduler", ["Temporal", "Kubernetes CronJobs", "a Postgres-backed queue"]),
    ("Secrets Storage", ["HashiCorp Vault", "AWS Secrets Manager", "sealed secrets"]),
    ("PDF Generation", ["a headless Chromium worker", "WeasyPrint", "a paid rendering API"]),
    ("Search Backend", ["OpenSearch", "Typesense", "PostgreSQL full-text search"]),
    ("Feature Rollouts", ["percentage rollouts by customer id", "region-by-region rollouts"]),
]
CAUSES = [
    "a connection pool sized for the old instance type ran out under the Monday peak",
    "an expired intermediate certificate in the trust bundle of one node pool",
    "a migration took an exclusive lock on a hot table for eleven minutes",
    "a retry storm after a carrier timeout multiplied traffic by six",
    "a feature flag was flipped for all customers instead of the staff cohort",
    "a disk filled with debug logs left on after an earlier investigation",
    "a DNS record pointed at a load balancer that had been decommissioned",
    "a cache eviction policy change pushed every read to the database",
    "a memory leak in the new image library crashed pods every forty minutes",
    "a cron job ran twice because two replicas both believed they were the leader",
    "a third-party rate limit we had never hit before",
    "a schema change was deployed before the code that could read it",
]
GLOSSARY = [
    ("Error Budget", "the amount of unreliability an SLO allows over its window; when it is "
     "spent, feature work pauses for reliability work"),
    ("Service Level Objective", "a target for a service level indicator over a time window, "
     "such as 99.9 % of checkout requests succeeding over 28 days"),
    ("Burn Rate", "how fast an error budget is being spent, relative to spending it exactly "
     "over the whole window"),
    ("Toil", "manual, repetitive operational work that scales with traffic and has no lasting "
     "value"),
    ("Blast Radius", "the set of customers or systems a change or failure can affect"),
    ("Canary Release", "sending a small share of traffic to a new version before the rest"),
    ("Dark Launch", "deploying code to production with its feature turned off for everyone"),
    ("Shadow Traffic", "a copy of production requests sent to a new system whose responses "
     "are discarded"),
    ("Postmortem", "the written review of an incident: timeline, impact, causes and "
     "follow-ups"),
    ("Blameless Review", "a review that looks for causes in systems and processes, not in "
     "the people involved"),
    ("Mean Time to Recovery", "the average time from the start of customer impact to its end"),
    ("Change Freeze", "a period when production changes need an extra approval"),
    ("Golden Signals", "latency, traffic, errors and saturation"),
    ("Backpressure", "a way for a slow consumer to make its producers slow down"),
    ("Idempotency Key", "a client-chosen key that lets a server recognise and ignore a "
     "repeated request"),
    ("Dead Letter Queue", "where messages go after they failed processing too many times"),
    ("Circuit Breaker", "a guard that stops calling a failing dependency for a while"),
    ("Hot Standby", "a replica that can serve reads and be promoted quickly"),
    ("Point-in-time Recovery", "restoring a database to any moment inside the backup window"),
    ("Write-ahead Log", "the log a database writes before changing its data files"),
    ("Connection Pool", "a set of open database connections shared by many requests"),
    ("Read Replica", "a copy of a database that follows the primary and serves reads"),
    ("Sharding", "splitting one dataset across several databases by a key"),
    ("Rate Limiter", "a component that caps how many requests a client may make"),
    ("Saga", "a sequence of local transactions with compensating steps instead of one "
     "distributed transaction"),
    ("Outbox Pattern", "writing outgoing events to a table in the same transaction as the "
     "change, and publishing them afterwards"),
    ("Blue-green Deploy", "running the old and new versions side by side and switching "
     "traffic at once"),
    ("Rollback", "returning production to the previous known-good version"),
    ("Game Day", "a planned exercise where we break something on purpose to practise "
     "recovery"),
    ("Pager Fatigue", "the loss of attention that comes from too many pages, most of them "
     "not actionable"),
    ("On-call Handover", "the short meeting where the outgoing on-call engineer briefs the "
     "incoming one"),
    ("Escalation Path", "who gets involved, in what order, when an incident grows"),
    ("Synthetic Check", "a scripted request that exercises a user journey from outside"),
    ("Cardinality", "the number of distinct label combinations a metric has"),
    ("Trace Sampling", "keeping only some traces, chosen by a rule, to control cost"),
    ("Log Level", "the severity attached to a log line, from debug to error"),
    ("Cold Storage", "cheap, slow storage for data that is rarely read"),
    ("Data Steward", "the person accountable for the quality and use of one dataset"),
    ("Runbook", "step-by-step instructions for a known operational task"),
    ("Feature Flag", "a switch that turns code paths on or off without a deploy"),
]  # fmt: skip
CHANGE_TASKS = [
    "move the staging cluster to the new node pool",
    "write the load test for the Black Friday peak",
    "draft the on-call compensation proposal",
    "clean up the unused S3 buckets",
    "add the missing alerts on queue depth",
    "review the dashboard for the checkout funnel",
    "upgrade the base images to Debian 13",
    "measure cold-start time of the mobile app",
    "set up the quarterly access review",
    "archive the 2024 incident tickets",
    "document the database failover drill",
    "retire the old cron host",
    "compare the two CDN quotes",
    "rename the legacy Slack channels",
    "test restoring the catalog from a snapshot",
    "book the room for the architecture offsite",
]
FILLER = [
    "Questions about this page go to the author; edits are welcome, but say why in the "
    "change summary.",
    "This page is reviewed twice a year, and after any incident that touched it.",
    "If something here is out of date, fix it rather than adding a comment below.",
    "Links to dashboards assume you are on the VPN.",
    "We keep the history of this page in the wiki; older decisions are not deleted.",
    "Numbers on this page were last checked during the spring review.",
    "Ask in the engineering channel if a term here is unfamiliar.",
    "Everything here applies to production; staging is more relaxed.",
]


ALERT_RULES = [
    ("HighErrorRate", "more than 2 % of requests fail for 10 minutes"),
    ("HighLatency", "p99 latency stays above 800 ms for 15 minutes"),
    ("PodsCrashLooping", "a pod restarts more than three times in 10 minutes"),
    ("QueueBacklog", "more than 10,000 messages wait for over 5 minutes"),
    ("SaturationHigh", "CPU stays above 85 % on every replica for 20 minutes"),
    ("SyntheticCheckFailing", "the synthetic check fails from two regions"),
    ("ErrorBudgetBurn", "the error budget burns at 14 times the sustainable rate"),
]
PREVIOUS_JOBS = [
    "payment systems at a bank", "a logistics start-up", "research computing at a university",
    "game servers", "the streaming platform of a public broadcaster", "a travel booking site",
    "an open-source database", "the checkout of a large supermarket chain",
]  # fmt: skip
PERSON_EXTRA = [
    "{first} is one of the people who can approve production database changes.",
    "Mentors new joiners during their first month.",
    "Out of office most Fridays in August.",
    "{first} gave the internal talk on reading flame graphs; the recording is in the drive.",
    "Still the best person to ask about the 2023 data-centre move.",
    "Part of the hiring panel for backend roles.",
]
TEAM_EXTRA = [
    "We plan in two-week cycles and demo on the last Thursday of each cycle.",
    "Requests from other teams go through the intake form; urgent ones through the on-call.",
    "Our board of current work is public; anyone can comment on a card.",
    "Every quarter we pick one reliability theme and spend a fifth of our time on it.",
    "Code review within one working day is a team promise, not a wish.",
    "New joiners shadow two on-call weeks before taking their own.",
    "Team {team} keeps a decision log; larger decisions become ADRs.",
]
SERVICE_EXTRA = [
    "Deploys go out through the standard pipeline, several times a day.",
    "Its Grafana dashboard is named after the service and has the four golden signals on top.",
    "Most of its latency comes from calls to {dep}.",
    "Load is highest between 18:00 and 22:00 UTC, when readers browse after work.",
    "A 5 % canary runs for ten minutes before every full rollout of {s}.",
    "The service has no scheduled downtime; schema changes are done online.",
    "{s} was split out of the old monolith in 2022.",
]
TERM_EXTRA = [
    "In documents, stick to the definition above; in chat the word is used more loosely.",
    "New joiners sometimes confuse it with {other}.",
    "Several design records refer to it; search the design folder for examples.",
    "Dashboards show it per service where it applies.",
    "The idea is older than our company; we did not invent the name.",
    "Postmortems mention it more often than design records do.",
    "If a design record leaves it out, reviewers will ask about it.",
    "The platform team's onboarding course covers it in the first week.",
]
OPTION_NOTES = [
    "well known in the team, but one more thing to run",
    "managed for us, at a higher monthly cost",
    "the least code, with the fewest features",
    "fast in the benchmark, little experience in the team",
    "what the other services already use",
    "flexible, but the configuration is easy to get wrong",
]
MEETING_EXTRA = [
    "Staging was unstable twice this week; the platform team is looking into it.",
    "Welcome to {person}, who moved over from another team.",
    "Reminder to fill in the engineering survey before Friday.",
    "The shared test data set was refreshed; old fixtures are gone.",
    "Nobody had objections to moving this meeting to the afternoon.",
    "The on-call load was quiet; two pages, both false alarms.",
]
RUNBOOK_EXTRA = [
    "Make sure you are on the VPN and have production access for the namespace.",
    "Tell the incident channel what you are about to do.",
    "If an incident is open, ask the incident lead first.",
    "Have the service dashboard open in another tab.",
    "Check that no deploy is in progress.",
]


class Corpus:
    """Builds the notes and the question rows together, so answers are exact sentences."""

    def __init__(self) -> None:
        self.rng = random.Random(SEED)
        self.notes: dict[str, Note] = {}  # key -> note
        self.multi: list[dict] = []
        self.single: list[dict] = []
        self.unanswerable: list[dict] = []

    # --- helpers ---------------------------------------------------------------------------

    def add(self, key: str, path: str, title: str) -> Note:
        note = Note(path=path, title=title)
        self.notes[key] = note
        return note

    def link(self, source: Note, key: str, alias: str | None = None) -> str:
        """A link from `source` to note `key`: a wiki link, an aliased wiki link or a relative
        Markdown link, chosen at random (the three forms the graph must resolve)."""
        target = self.notes[key]
        style = self.rng.random()
        if style < 0.45:
            return f"[[{target.title}]]"
        if style < 0.7:
            return f"[[{target.title}|{alias or self.alias(key)}]]"
        rel = posixpath.relpath(target.path, posixpath.dirname(source.path) or ".")
        return f"[{alias or target.title}]({rel})"

    def alias(self, key: str) -> str:
        """A natural alias for an aliased wiki link to note `key`."""
        kind, _, name = key.partition(":")
        if kind == "person":
            return name.split()[0]
        if kind == "team":
            return f"the {name} team"
        if kind == "adr":
            return f"ADR-{int(name):03d}"
        if kind == "policy":
            return name.lower().replace(" policy", " rules")
        title = self.notes[key].title
        if kind in ("restart", "restore", "rotate", "misc"):
            return "the runbook"
        if kind in ("meeting", "incident"):
            return f"the {re.search(r'2026-[0-9-]+', title).group()} {kind}"
        if kind in ("term", "service", "store"):
            return title.lower()
        return title

    def some(self, pool: list[str], low: int, high: int, **values: str) -> list[str]:
        """Between `low` and `high` distinct sentences of `pool`, formatted with `values`."""
        count = self.rng.randint(low, high)
        return [line.format(**values) for line in self.rng.sample(pool, count)]

    def pick(self, options: list[str]) -> str:
        return self.rng.choice(options)

    def pad(self, note: Note, *, words: int = MIN_WORDS + 5) -> None:
        """Add filler sentences until the note has at least `words` words."""
        pool = list(FILLER)
        self.rng.shuffle(pool)
        while len(note.text().split()) < words and pool:
            note.lines += ["", pool.pop()]

    # --- the notes -------------------------------------------------------------------------

    def build(self) -> None:
        rng = self.rng
        # Shells first (paths and titles), so any note can link to any other.
        self.people = {}
        for index, name in enumerate(PEOPLE):
            city, tz = PLACES[index % len(PLACES)]
            self.people[name] = {
                "city": city,
                "tz": tz,
                "role": ROLES[index % len(ROLES)],
                "since": 2017 + index % 9,
                "interest": INTERESTS[index % len(INTERESTS)],
            }
            self.add(f"person:{name}", f"people/{slug(name)}.md", name)
        self.teams = {}
        for index, animal in enumerate(TEAMS):
            members = [*PEOPLE[index * 2 : index * 2 + 2], PEOPLE[(index * 5 + 3) % len(PEOPLE)]]
            self.teams[animal] = {
                "lead": members[0],
                "members": members,
                "alias": f"{animal.lower()}-{rng.choice(['oncall', 'primary', 'pager'])}",
                "slack": f"#{animal.lower()}-{rng.choice(['help', 'ops', 'questions'])}",
                "day": WEEKDAYS[index % 5],
                "time": rng.choice(["09:30", "10:00", "11:00", "14:00", "15:30"]),
                "standup": rng.choice(["09:15", "09:45", "10:15", "13:30"]),
                "mission": MISSIONS[index],
            }
            self.add(f"team:{animal}", f"teams/team-{slug(animal)}.md", f"Team {animal}")
        self.datastores = {}
        for index, (name, engine, tier) in enumerate(DATASTORES):
            self.datastores[name] = {
                "engine": engine,
                "tier": tier,
                "window": f"{rng.randint(0, 4):02d}:{rng.choice(['05', '20', '35', '40', '50'])}",
                "minutes": rng.randint(8, 95),
                "size": rng.randint(40, 2400),
                "host": f"{slug(name).split('-')[0]}-db-{index + 1}.internal.brightmoss.example",
            }
            self.add(f"store:{name}", f"datastores/{slug(name)}.md", name)
        self.services = {}
        for index, name in enumerate(SERVICES):
            self.services[name] = {
                "purpose": PURPOSES[index],
                "team": TEAMS[index % len(TEAMS)],
                "lang": LANGUAGES[(index * 3) % len(LANGUAGES)],
                "port": 8000 + rng.randint(10, 990),
                "store": SERVICE_STORES[name],
                "lead": PEOPLE[(index * 7 + 4) % len(PEOPLE)],
                "deps": [SERVICES[(index + 3) % 40], SERVICES[(index + 11) % 40]],
                "slo": rng.choice(["99.5 %", "99.9 %", "99.95 %"]),
                "credential": list(CREDENTIALS)[index % 3],
                "namespace": rng.choice(["shop", "fulfilment", "platform", "payments"]),
            }
            self.add(f"service:{name}", f"services/{slug(name)}.md", name)
        policies = [
            "Backup Policy",
            "Secret Rotation Policy",
            "Incident Severity Levels",
            "Deploy Freeze Policy",
            "Log Retention Policy",
            "Access Review Policy",
            "On-call Handbook",
            "Change Approval Policy",
            "Data Classification Policy",
            "Vendor Security Review",
        ]
        for name in policies:
            self.add(f"policy:{name}", f"policies/{slug(name)}.md", name)
        for term, _ in GLOSSARY:
            self.add(f"term:{term}", f"glossary/{slug(term)}.md", term)
        self.restart_services = SERVICES[:26]
        for name in self.restart_services:
            self.add(f"restart:{name}", f"runbooks/restart-{slug(name)}.md", f"Restart the {name}")
        for name in self.datastores:
            self.add(
                f"restore:{name}",
                f"runbooks/restore-{slug(name)}.md",
                f"Restore {name} from Backup",
            )
        self.rotate_services = SERVICES[5:19]
        for name in self.rotate_services:
            self.add(
                f"rotate:{name}",
                f"runbooks/rotate-{slug(name)}-credentials.md",
                f"Rotate {name} Credentials",
            )
        self.adrs = []
        for index in range(40):
            topic, options = ADR_TOPICS[index % len(ADR_TOPICS)]
            service = SERVICES[(index * 13 + 2) % 40]
            title = f"ADR-{index + 1:03d} {topic} for {service}"
            choice = options[(index // len(ADR_TOPICS)) % len(options)]
            self.adrs.append(
                {
                    "title": title,
                    "topic": topic,
                    "service": service,
                    "choice": choice,
                    "options": options,
                    "n": index + 1,
                }
            )
            self.add(f"adr:{index + 1}", f"design/adr-{index + 1:03d}-{slug(topic)}.md", title)
        self.incidents = []
        for index in range(36):
            service = SERVICES[(index * 7 + 1) % 40]
            month, day = 1 + index % 11, 1 + (index * 5) % 27
            date = f"2026-{month:02d}-{day:02d}"
            kind = ["Outage", "Slowdown", "Errors", "Data Delay"][index % 4]
            title = f"Incident {date} {service} {kind}"
            start_h, start_m = rng.randint(0, 22), rng.choice([3, 12, 27, 41, 52])
            minutes = rng.randint(9, 170)
            end = start_h * 60 + start_m + minutes
            self.incidents.append(
                {
                    "title": title,
                    "date": date,
                    "service": service,
                    "kind": kind,
                    "sev": ["SEV1", "SEV2", "SEV3"][index % 3],
                    "cause": CAUSES[index % len(CAUSES)],
                    "minutes": minutes,
                    "start": f"{start_h:02d}:{start_m:02d}",
                    "end": f"{(end // 60) % 24:02d}:{end % 60:02d}",
                    "n": index,
                }
            )
            self.add(f"incident:{index}", f"incidents/{date}-{slug(service)}.md", title)
        self.meetings = []
        for index in range(56):
            month, day = 1 + index % 11, 2 + (index * 3) % 26
            date = f"2026-{month:02d}-{day:02d}"
            kind = ["Architecture Review", "Ops Sync", "Incident Retro", "Planning"][index % 4]
            title = f"{kind} {date}"
            self.meetings.append({"title": title, "kind": kind, "date": date, "n": index})
            self.add(f"meeting:{index}", f"meetings/{date}-{slug(kind)}.md", title)
        self.add("dup:runbook", "runbooks/deploy-checklist.md", AMBIGUOUS_TITLE)
        self.add("dup:design", "design/deploy-checklist.md", AMBIGUOUS_TITLE)
        for name in [
            "Build Agent Disk Full",
            "Clear a Stuck Deploy",
            "Flush the CDN Cache",
            "Drain a Kubernetes Node",
            "Replay the Dead Letter Queue",
            "Renew the Wildcard Certificate",
        ]:
            self.add(f"misc:{name}", f"runbooks/{slug(name)}.md", name)

        # Then the bodies.
        for name in PEOPLE:
            self.person(name)
        for animal in TEAMS:
            self.team(animal)
        for name in self.datastores:
            self.datastore(name)
        for name in SERVICES:
            self.service(name)
        self.policies()
        for term, definition in GLOSSARY:
            self.term(term, definition)
        for name in self.restart_services:
            self.restart(name)
        for name in self.datastores:
            self.restore(name)
        for name in self.rotate_services:
            self.rotate(name)
        for adr in self.adrs:
            self.adr(adr)
        for incident in self.incidents:
            self.incident(incident)
        # Each architecture review approves one ADR; the ADR does not link back (backlinks
        # are what the graph is for).
        reviews = [m for m in self.meetings if m["kind"] == "Architecture Review"]
        for review, adr in zip(reviews, self.adrs, strict=False):
            review["adrs"] = [adr]
        retros = [m for m in self.meetings if m["kind"] == "Incident Retro"]
        for index, incident in enumerate(self.incidents):
            retros[index % len(retros)].setdefault("incidents", []).append(incident)
        for meeting in self.meetings:
            self.meeting(meeting)
        self.extras()
        for note in self.notes.values():
            self.pad(note)

    def person(self, name: str) -> None:
        info = self.people[name]
        note = self.notes[f"person:{name}"]
        first = name.split()[0]
        info["answer"] = f"{first} works from {info['city']}, on {info['tz']} time."
        intro = self.pick(
            [
                f"{name} is a {info['role']} at Brightmoss and joined in {info['since']}.",
                f"{first} joined Brightmoss in {info['since']} and is a {info['role']}.",
                f"{name} has been with us since {info['since']}; current role: {info['role']}.",
            ]
        )
        note.lines += [
            intro,
            "",
            "## Working hours",
            "",
            info["answer"],
            self.pick(
                [
                    "Meetings are best booked in the first half of the day.",
                    "Prefers written questions to calls; replies within a working day.",
                    "Calendar is kept up to date, so book free slots directly.",
                ]
            ),
            "",
            "## Interests",
            "",
            f"Happy to help with {info['interest']}.",
            self.pick(
                [
                    "Ask about the history of the older services too.",
                    "Runs the internal reading group every other Thursday.",
                    "Usually reviews design documents on Fridays.",
                ]
            ),
        ]
        before = self.pick(PREVIOUS_JOBS)
        note.lines += [
            "",
            "## Background",
            "",
            self.pick(
                [
                    f"Before Brightmoss, {first} worked on {before}.",
                    f"{first} came to us from {before}.",
                ]
            ),
            *self.some(PERSON_EXTRA, 1, 2, first=first),
        ]

    def team(self, animal: str) -> None:
        info = self.teams[animal]
        note = self.notes[f"team:{animal}"]
        info["pager"] = self.pick(
            [
                f"Pages go to the `{info['alias']}` alias in PagerDuty.",
                f"The pager alias is `{info['alias']}`; PagerDuty routes it to whoever is on call.",
                f"To page us, use the PagerDuty alias `{info['alias']}`.",
            ]
        )
        info["handover"] = (
            f"The on-call rotation is weekly and hands over on {info['day']} at {info['time']}."
        )
        info["slack_line"] = f"Day-to-day questions go to `{info['slack']}` in Slack."
        lead = self.link(note, f"person:{info['lead']}")
        members = ", ".join(self.link(note, f"person:{m}") for m in info["members"][1:])
        note.lines += [
            self.pick(
                [
                    f"Team {animal} looks after {info['mission']}.",
                    f"We are Team {animal}. Our area is {info['mission']}.",
                    f"Team {animal} owns {info['mission']}.",
                ]
            ),
            "",
            f"Lead: {lead}. Also on the team: {members}.",
            "",
            "## On call",
            "",
            info["pager"],
            info["handover"],
            self.pick(
                [
                    "The outgoing engineer writes a short handover note in the team channel.",
                    "Handover is a fifteen-minute call; open incidents are walked through first.",
                ]
            ),
            "",
            "## Talking to us",
            "",
            info["slack_line"],
            f"Standup is at {info['standup']} every working day and anyone may listen in.",
            "",
            "## How we work",
            "",
            *self.some(TEAM_EXTRA, 2, 3, team=animal),
        ]
        if animal == "Kestrel":
            note.lines += ["", f"Our old pages still live on the [[{MISSING_TITLES[2]}]]."]

    def datastore(self, name: str) -> None:
        info = self.datastores[name]
        note = self.notes[f"store:{name}"]
        info["engine_line"] = f"{name} runs {info['engine']} on `{info['host']}`."
        info["window_line"] = self.pick(
            [
                f"The nightly backup of {name} starts at {info['window']} UTC and takes about "
                f"{info['minutes']} minutes.",
                f"Backups of {name} start at {info['window']} UTC every night (roughly "
                f"{info['minutes']} minutes).",
            ]
        )
        policy = self.link(note, "policy:Backup Policy")
        note.lines += [
            self.pick(
                [
                    f"{name} is one of our main datastores, about {info['size']} GB today.",
                    f"This page describes {name}, which holds about {info['size']} GB.",
                ]
            ),
            "",
            info["engine_line"],
            "Access goes through the bastion; nobody connects from a laptop directly.",
            "",
            "## Backups",
            "",
            f"{name} is a Tier {info['tier']} store; what that tier means for retention is "
            f"set in the {policy}.",
            info["window_line"],
            f"To restore, follow {self.link(note, 'restore:' + name)}.",
        ]

    def service(self, name: str) -> None:
        info = self.services[name]
        note = self.notes[f"service:{name}"]
        info["port_line"] = f"{name} listens on port {info['port']} inside the cluster."
        info["lang_line"] = self.pick(
            [
                f"{name} is written in {info['lang']}.",
                f"The code of {name} is {info['lang']}, in the `{slug(name)}` repository.",
            ]
        )
        team = self.link(note, f"team:{info['team']}", f"Team {info['team']}")
        deps = " and ".join(self.link(note, f"service:{d}") for d in info["deps"])
        lines = [
            self.pick(
                [
                    f"{name} {info['purpose']}.",
                    f"What it does: {name} {info['purpose']}.",
                    f"In one sentence, {name} {info['purpose']}.",
                ]
            ),
            "",
            "## Facts",
            "",
            info["lang_line"],
            info["port_line"],
            f"Its availability objective is {info['slo']} over 28 days.",
            f"It calls {deps}.",
        ]
        if info["store"]:
            lines.append(
                self.pick(
                    [
                        f"{name} keeps its state in {self.link(note, 'store:' + info['store'])}; "
                        "backups and restores of that data are handled there.",
                        f"Data: {self.link(note, 'store:' + info['store'])}, which also covers "
                        f"backups of {name} data.",
                    ]
                )
            )
        else:
            lines.append(f"{name} is stateless; it can be scaled up and down freely.")
        camel = "".join(w[:1].upper() + w[1:] for w in slug(name).split("-"))
        alerts = self.rng.sample(ALERT_RULES, 2)
        lines += [
            "",
            "## Alerts",
            "",
            *(f"- `{camel}{rule}` fires when {when}." for rule, when in alerts),
            "",
            self.pick(
                [
                    "Both alerts have a dashboard link in their description.",
                    "Thresholds were last tuned after the spring load test.",
                    "Warnings go to the team channel; only the alerts above page.",
                ]
            ),
        ]
        lines += [
            "",
            "## Ownership",
            "",
            self.pick(
                [
                    f"Alerts from {name} page the owning team. "
                    f"On-call for this service: see {team}.",
                    f"When {name} alerts fire, the on-call engineer of {team} is paged.",
                    f"{name} is owned by {team}; its alerts page their on-call.",
                ]
            ),
            f"Tech lead: {self.link(note, 'person:' + info['lead'])}.",
        ]
        if name in self.restart_services:
            lines.append(f"Restarting it safely: {self.link(note, 'restart:' + name)}.")
        lines += ["", "## Notes", "", *self.some(SERVICE_EXTRA, 1, 3, s=name, dep=info["deps"][0])]
        if name == "Checkout Gateway":
            lines += ["", f"For card processor failures see the [[{MISSING_TITLES[0]}]]."]
        if name == "Pricing Engine":
            lines += ["", f"Load projections are in the [[{MISSING_TITLES[1]}]]."]
        note.lines += lines

    def policies(self) -> None:
        note = self.notes["policy:Backup Policy"]
        note.lines += [
            "Every datastore has a backup tier, written on the datastore's own page. The tier "
            "decides how often copies are made and how long they are retained.",
            "",
            "## Tiers",
            "",
            *(f"- {TIER_RETENTION[t]}" for t in (1, 2, 3)),
            "",
            "Backups are encrypted and copied to a second region within an hour. A restore "
            "test runs every quarter for one Tier 1 store chosen at random.",
        ]
        note = self.notes["policy:Secret Rotation Policy"]
        note.lines += [
            "Credentials are rotated on a fixed schedule, and at once if one may have leaked.",
            "",
            *(f"- {line}" for line in CREDENTIALS.values()),
            "",
            "Rotation is done by the owning team with the service's own runbook; the security "
            "team checks the dates every month.",
        ]
        note = self.notes["policy:Incident Severity Levels"]
        note.lines += [
            "Every incident gets a severity when it is declared; the incident lead may change "
            "it later.",
            "",
            *(f"- {line}" for line in SEVERITIES.values()),
            "",
            f"Every SEV1 and SEV2 gets a written {self.link(note, 'term:Postmortem')}.",
        ]
        note = self.notes["policy:Deploy Freeze Policy"]
        note.lines += [
            "Production deploys are frozen from 20 November to 2 December for the Black Friday "
            "peak, and from 22 December to 2 January.",
            f"During a freeze, a deploy needs the approval described in the "
            f"{self.link(note, 'policy:Change Approval Policy')}.",
            f"See also {self.link(note, 'term:Change Freeze')}.",
        ]
        note = self.notes["policy:Log Retention Policy"]
        note.lines += [
            "Application logs are kept for 30 days in the log store.",
            "Audit logs are kept for 400 days and then moved to cold storage.",
            "Access logs of the load balancers are kept for 90 days.",
            "Nothing that identifies a customer may be logged at info level.",
        ]
        note = self.notes["policy:Access Review Policy"]
        note.lines += [
            "Every quarter, each team lead reviews who can reach production for their services.",
            "Access not confirmed within ten working days is removed.",
            "Leavers lose access on their last day; the identity team runs the check.",
        ]
        note = self.notes["policy:On-call Handbook"]
        note.lines += [
            "On-call engineers get a fixed weekly allowance plus time off after a night page.",
            f"Each team sets its own rotation; see the team pages, for example "
            f"{self.link(note, 'team:Falcon')}.",
            f"Before your first shift, read {self.link(note, 'term:On-call Handover')} and "
            f"{self.link(note, 'policy:Incident Severity Levels')}.",
            "The Escalation Path is described in each team's page.",  # unlinked mention
        ]
        note = self.notes["policy:Change Approval Policy"]
        note.lines += [
            "Changes to production databases need two approvers from the owning team.",
            "During a freeze, a director approves as well.",
            "Emergency fixes may go out with one approval and a review the next day.",
        ]
        note = self.notes["policy:Data Classification Policy"]
        note.lines += [
            "Data is public, internal, confidential or restricted.",
            "Payment data is restricted and never leaves the payments network.",
            f"Each dataset has a {self.link(note, 'term:Data Steward')}.",
        ]
        note = self.notes["policy:Vendor Security Review"]
        note.lines += [
            "Any new vendor that stores customer data goes through a security questionnaire.",
            "The review is repeated every two years.",
            f"Contacts for current vendors were on the [[{MISSING_TITLES[3]}]] page.",
        ]

    def term(self, term: str, definition: str) -> None:
        note = self.notes[f"term:{term}"]
        sentence = f"{term} means {definition}."
        note.lines += [
            sentence,
            "",
            self.pick(
                [
                    "We use the term mostly in design reviews and postmortems.",
                    "You will hear it in incident calls and planning.",
                    "It comes up often on this wiki.",
                ]
            ),
        ]
        others = [t for t, _ in GLOSSARY if t != term]
        note.lines += ["", *self.some(TERM_EXTRA, 2, 3, other=self.pick(others))]
        related = self.rng.sample(others, 2)
        note.lines += ["", "Related: " + ", ".join(self.link(note, f"term:{t}") for t in related)]
        # An unlinked mention of a service title.
        note.lines += [
            "",
            self.pick(
                [
                    f"For an example, ask how {self.pick(SERVICES)} handles it.",
                    f"{self.pick(SERVICES)} is a good place to see it in practice.",
                    f"The clearest case in our systems is {self.pick(SERVICES)}.",
                ]
            ),
        ]

    def restart(self, name: str) -> None:
        info = self.services[name]
        note = self.notes[f"restart:{name}"]
        ns, deploy = info["namespace"], slug(name)
        note.lines += [
            self.pick(
                [
                    f"Use this when {name} is stuck or leaking memory and a restart is the fix.",
                    f"This runbook restarts {name} without dropping requests.",
                    f"Restart {name} only after checking the dashboards; "
                    "most alerts do not need it.",
                ]
            ),
            "",
            "## Before you start",
            "",
            *self.some(RUNBOOK_EXTRA, 1, 2),
            "",
            "## Steps",
            "",
            f"1. Check that the other replicas are healthy: `kubectl -n {ns} get pods -l app={deploy}`.",  # noqa: E501
            f"2. Restart: `kubectl -n {ns} rollout restart deploy/{deploy}`.",
            f"3. Watch the rollout: `kubectl -n {ns} rollout status deploy/{deploy}`.",
            "4. Check the error rate on the service dashboard for five minutes.",
            "",
            "## If the restart fails",
            "",
            self.pick(
                [
                    f"Escalate to the on-call of the team that owns {self.link(note, 'service:' + name)}.",  # noqa: E501
                    f"If it does not recover, escalate to the owners listed on {self.link(note, 'service:' + name)}.",  # noqa: E501
                ]
            ),
            "Do not restart more than twice in an hour; that hides the real problem.",
        ]

    def restore(self, name: str) -> None:
        note = self.notes[f"restore:{name}"]
        policy = self.link(note, "policy:Backup Policy")
        store = self.link(note, "store:" + name)
        note.lines += [
            self.pick(
                [
                    f"How to restore {store} from backups per the {policy}.",
                    f"Restore {store} from backups; what exists is set by the {policy}.",
                ]
            ),
            "",
            "## Steps",
            "",
            *self.some(RUNBOOK_EXTRA, 1, 2),
            "",
            "1. Declare an incident and tell the owning team before touching anything.",
            "2. Pick the snapshot: the newest one before the damage, not simply the newest.",
            "3. Restore into a new instance; never over the live one.",
            "4. Compare row counts of the main tables with yesterday's report.",
            "5. Switch the connection string and restart the writers.",
            "",
            "Write down every command you ran in the incident channel.",
        ]

    def rotate(self, name: str) -> None:
        info = self.services[name]
        note = self.notes[f"rotate:{name}"]
        policy = self.link(note, "policy:Secret Rotation Policy")
        note.lines += [
            f"{name} uses a {info['credential']}; this runbook replaces it without downtime.",
            f"Rotate it on the schedule in the {policy}, or at once if it may have leaked.",
            "",
            "## Steps",
            "",
            *self.some(RUNBOOK_EXTRA, 0, 1),
            "",
            "1. Create the new credential next to the old one in Vault.",
            f"2. Roll {self.link(note, 'service:' + name)} so every pod reads the new value.",
            "3. Watch for authentication errors for ten minutes.",
            "4. Revoke the old credential and note the date in the service page's history.",
        ]

    def adr(self, adr: dict) -> None:
        note = self.notes[f"adr:{adr['n']}"]
        others = [o for o in adr["options"] if o != adr["choice"]]
        reviewed = sum(1 for m in self.meetings if m["kind"] == "Architecture Review")
        adr["decision"] = self.pick(
            [
                f"Decision: we will use {adr['choice']} for {adr['service']}.",
                f"We decided on {adr['choice']} for {adr['service']}.",
            ]
        )
        term = GLOSSARY[adr["n"] % len(GLOSSARY)][0]
        note.lines += [
            f"Status: {'Accepted' if adr['n'] <= reviewed or adr['n'] % 5 else 'Proposed'}. "
            f"Service: {self.link(note, 'service:' + adr['service'])}.",
            "",
            "## Context",
            "",
            self.pick(
                [
                    f"{adr['service']} needs a {adr['topic'].lower()} that the team can run "
                    "without a specialist.",
                    f"The current {adr['topic'].lower()} of {adr['service']} grew by accident "
                    "and nobody owns it.",
                    f"We want to settle the {adr['topic'].lower()} question for {adr['service']} "
                    "before the next peak.",
                ]
            ),
            f"The change touches the {self.link(note, 'term:' + term)} of the service.",
            "",
            "## Decision",
            "",
            adr["decision"],
            f"We looked at {' and '.join(others)} as well.",
            "",
            "## Options considered",
            "",
            *(f"- {option}: {self.pick(OPTION_NOTES)}" for option in adr["options"]),
            "",
            "## Consequences",
            "",
            self.pick(
                [
                    "The team gets one more system to operate, in exchange for less custom code.",
                    "Migration happens service by service; the old path stays for one quarter.",
                    "Costs go up slightly; the on-call load should go down.",
                ]
            ),
        ]
        if adr["n"] in (3, 17):
            note.lines += ["", f"Follow the {'[[' + AMBIGUOUS_TITLE + ']]'} when rolling out."]

    def incident(self, inc: dict) -> None:
        note = self.notes[f"incident:{inc['n']}"]
        inc["duration"] = (
            f"Customer impact lasted {inc['minutes']} minutes, from {inc['start']} to "
            f"{inc['end']} UTC."
        )
        inc["cause_line"] = f"Root cause: {inc['cause']}."
        impact = KIND_PHRASE[inc["kind"]]
        severity = self.link(note, "policy:Incident Severity Levels")
        service = self.link(note, "service:" + inc["service"])
        note.lines += [
            f"Service affected: {service}. Severity: {inc['sev']}, as defined in {severity}.",
            "",
            "## Summary",
            "",
            self.pick(
                [
                    f"On {inc['date']} customers saw {impact} in {inc['service']}.",
                    f"{inc['service']} had {impact} on {inc['date']}.",
                ]
            ),
            inc["duration"],
            "",
            "## Timeline",
            "",
            f"- {inc['start']} first alert or report.",
            f"- {self.pick(['A few minutes later,', 'Shortly after,', 'Soon after,'])} "
            "the incident was declared and an incident lead named.",
            f"- {inc['end']} impact over; monitoring continued for another hour.",
            "",
            "## Causes",
            "",
            inc["cause_line"],
            self.pick(
                [
                    "Monitoring caught it, but the alert threshold was too loose.",
                    "A customer report reached support before any alert fired.",
                    "The synthetic check failed first and paged within two minutes.",
                ]
            ),
            "",
            "## Follow-ups",
            "",
            "Follow-ups are tracked by the team that owns the service.",
            self.pick(
                [
                    "- Tighten the alert threshold.",
                    "- Add a load test that reproduces the failure.",
                    "- Write the missing runbook section.",
                ]
            ),
        ]
        if inc["service"] in self.restart_services and inc["n"] % 2:
            note.lines.append(f"- Review {self.link(note, 'restart:' + inc['service'])}.")

    def meeting(self, meeting: dict) -> None:
        note = self.notes[f"meeting:{meeting['n']}"]
        rng = self.rng
        attendees = rng.sample(PEOPLE, 4)
        meeting["actions"] = []
        note.lines += ["Attendees: " + ", ".join(self.link(note, f"person:{p}") for p in attendees)]
        note.lines += ["", "## Notes", ""]
        if meeting["kind"] == "Architecture Review":
            for adr in meeting.get("adrs", []):
                link = self.link(note, f"adr:{adr['n']}")
                note.lines.append(
                    self.pick(
                        [
                            f"- {link} was approved without changes; the decision and its "
                            "reasons are in the ADR.",
                            f"- We went through {link}. Approved as written.",
                            f"- {link}: approved after a short discussion of the rollout.",
                        ]
                    )
                )
        elif meeting["kind"] == "Incident Retro":
            for inc in meeting.get("incidents", []):
                note.lines.append(
                    f"- Walked through {self.link(note, 'incident:' + str(inc['n']))}."
                )
            note.lines.append("- Agreed that follow-ups need an owner before the meeting ends.")
        elif meeting["kind"] == "Ops Sync":
            store = self.pick(list(self.datastores))
            note.lines += [
                f"- Disk usage on {store} is growing faster than planned.",  # unlinked mention
                f"- Reminder: the {self.link(note, 'policy:Deploy Freeze Policy')} applies soon.",
            ]
            if meeting["n"] % 8 == 1:
                note.lines.append(f"- Checked the {'[[' + AMBIGUOUS_TITLE + ']]'} again.")
        else:
            service = self.pick(SERVICES)
            note.lines += [
                f"- Next quarter's main goal is moving {service} to the new cluster.",
                "- Hiring: two backend roles are open.",
            ]
            if meeting["n"] % 8 == 3:
                note.lines.append(f"- Numbers come from the [[{MISSING_TITLES[1]}]].")
        note.lines += [f"- {b}" for b in self.some(MEETING_EXTRA, 1, 2, person=self.pick(PEOPLE))]
        note.lines += ["", "## Action items", ""]
        for person in rng.sample(attendees, 2):
            task = self.pick(CHANGE_TASKS)
            due = f"2026-{(int(meeting['date'][5:7]) % 12) + 1:02d}-{rng.randint(1, 28):02d}"
            line = f"{person} will {task} by {due}."
            meeting["actions"].append((person, task, line))
            note.lines.append(f"- {line}")

    def extras(self) -> None:
        note = self.notes["dup:runbook"]
        note.lines += [
            "The checklist to go through before every production deploy.",
            "",
            "1. The change has a ticket and a reviewer who is not the author.",
            "2. Migrations are backwards compatible with the running version.",
            f"3. No freeze is in force ({self.link(note, 'policy:Deploy Freeze Policy')}).",
            "4. The dashboards of the service are open during the rollout.",
            f"5. You know how to do a {self.link(note, 'term:Rollback')}.",
        ]
        note = self.notes["dup:design"]
        note.lines += [
            "Old copy, kept for history: this was the checklist before the move to Kubernetes.",
            "",
            "1. Announce the deploy in the release channel.",
            "2. Take the node out of the load balancer.",
            "3. Copy the build and restart the process.",
            "4. Put the node back. The newer version lives in the runbooks folder; see "
            "[the runbook copy](../runbooks/deploy-checklist.md).",
        ]
        bodies = {
            "Build Agent Disk Full": "When a build agent's disk is full, builds fail with "
            "'no space left on device'. Run `docker system prune -af` on the agent, then "
            "re-run the build. If it happens twice in a week, ask for a bigger disk.",
            "Clear a Stuck Deploy": "A deploy that sits at 'progressing' for more than 15 "
            "minutes is stuck. Look at the events of the new pods first; a failed readiness "
            "probe is the usual reason. Roll back rather than forcing it through.",
            "Flush the CDN Cache": "Flush only the paths that changed: purging everything "
            "sends all traffic to the Image Resizer at once. Use the purge API with a list of "
            "paths, at most 500 per call.",
            "Drain a Kubernetes Node": "Cordon the node, then drain it with "
            "`kubectl drain NODE --ignore-daemonsets --delete-emptydir-data`. Wait for pods "
            "to be rescheduled before you terminate the instance.",
            "Replay the Dead Letter Queue": "Look at a sample of the messages first: replaying "
            "poison messages only sends them back. Replay with the admin tool in batches of "
            "100 and watch the consumer's error rate.",
            "Renew the Wildcard Certificate": "The wildcard certificate is renewed by "
            "cert-manager 30 days before it expires. If the renewal fails, the alert names "
            "the failing challenge; fix the DNS record and delete the failed order.",
        }
        for name, body in bodies.items():
            note = self.notes[f"misc:{name}"]
            note.lines += [body, ""]
            if name == "Replay the Dead Letter Queue":
                note.lines.append(f"Background: {self.link(note, 'term:Dead Letter Queue')}.")
            if name == "Clear a Stuck Deploy":
                note.lines.append(f"Before retrying, go through the [[{AMBIGUOUS_TITLE}]].")
            if name == "Drain a Kubernetes Node":
                note.lines.append(f"Older instructions were on the [[{MISSING_TITLES[2]}]].")

    # --- the questions ---------------------------------------------------------------------

    def distinct(self, service: str) -> bool:
        """Whether `service` keeps state in a datastore whose name shares no word with it
        (so a question naming the service does not name its datastore too)."""
        store = self.services[service]["store"]
        if store is None:
            return False
        words = {w.lower().rstrip("s") for w in service.split()}
        return not words & {w.lower().rstrip("s") for w in store.split()}

    def row(self, question: str, hops: int, path: list[str], answer: str) -> dict:
        paths = [self.notes[k].path for k in path]
        return {
            "question": question,
            "hops": hops,
            "start": paths[0],
            "path": paths,
            "file": paths[-1],
            "answer": answer,
        }

    def questions(self) -> None:
        rng = random.Random(SEED + 1)  # questions do not disturb the notes' random stream
        S = self.services
        m: list[dict] = []
        # hop 1: service -> team (pager alias)
        wordings = [
            "Who gets paged when {s} alerts fire?",
            "{s} alerts: who is paged",
            "who do I page about {s} errors",
            "Who is on call for {s}?",
        ]
        for i, name in enumerate(SERVICES[0:40:4]):
            q = wordings[i % len(wordings)].format(s=name)
            team = S[name]["team"]
            m.append(self.row(q, 1, [f"service:{name}", f"team:{team}"], self.teams[team]["pager"]))
        # hop 1: service -> tech lead (time zone)
        for i, name in enumerate(SERVICES[1:40:6]):
            q = [
                "What time zone is the {s} tech lead in?",
                "{s} tech lead time zone",
                "where does the tech lead of {s} work from",
            ][i % 3].format(s=name)
            lead = S[name]["lead"]
            m.append(
                self.row(q, 1, [f"service:{name}", f"person:{lead}"], self.people[lead]["answer"])
            )
        # hop 1: service -> datastore (backup window)
        picked = [n for n in SERVICES if self.distinct(n)][2:40:5]
        for i, name in enumerate(picked):
            q = [
                "When does the nightly backup of {s} data run?",
                "what time are {s} backups taken",
                "{s} state backup start time",
            ][i % 3].format(s=name)
            store = S[name]["store"]
            m.append(
                self.row(
                    q,
                    1,
                    [f"service:{name}", f"store:{store}"],
                    self.datastores[store]["window_line"],
                )
            )
        # hop 1: datastore -> Backup Policy (retention)
        for i, name in enumerate(["Ledger DB", "Catalog DB", "Session Store", "Events Store"]):
            q = [
                "How many days are {d} backups kept?",
                "{d} backup retention",
                "how long do we keep the {d} backups",
                "{d}: how far back can a backup go",
            ][i].format(d=name)
            tier = self.datastores[name]["tier"]
            m.append(
                self.row(q, 1, [f"store:{name}", "policy:Backup Policy"], TIER_RETENTION[tier])
            )
        # hop 1: architecture review -> ADR (decision)
        reviews = [x for x in self.meetings if x["kind"] == "Architecture Review"]
        for i, meeting in enumerate(reviews[:6]):
            adr = meeting["adrs"][0]
            q = ["What did the {m} decide?", "{m} outcome", "what was approved at the {m}"][
                i % 3
            ].format(m=meeting["title"])
            m.append(
                self.row(q, 1, [f"meeting:{meeting['n']}", f"adr:{adr['n']}"], adr["decision"])
            )
        # hop 1: rotation runbook -> Secret Rotation Policy (interval)
        for i, name in enumerate(self.rotate_services[1:13:3]):
            cred = S[name]["credential"]
            q = [
                "How often do I rotate the {s} credentials?",
                "{s} credential rotation interval",
                "how many days between rotations of the {s} {c}",
                "when is the {s} credential rotation due again",
            ][i].format(s=name, c=cred)
            m.append(
                self.row(
                    q, 1, [f"rotate:{name}", "policy:Secret Rotation Policy"], CREDENTIALS[cred]
                )
            )
        # hop 1: incident -> Incident Severity Levels (acknowledge time)
        for i, inc in enumerate(self.incidents[2:36:9]):
            q = [
                "How fast did someone have to respond to the {i}?",
                "{i} response deadline for its severity",
                "how quickly did on-call need to react to the {i}",
                "{i}: required response time",
            ][i].format(i=inc["title"])
            m.append(
                self.row(
                    q,
                    1,
                    [f"incident:{inc['n']}", "policy:Incident Severity Levels"],
                    SEVERITIES[inc["sev"]],
                )
            )
        # hop 2: restart runbook -> service -> team (pager alias)
        for i, name in enumerate(self.restart_services[3:26:4]):
            q = [
                "If restarting the {s} fails, who do I escalate to?",
                "restart {s} failed escalate",
                "who do I escalate to when the {s} restart does not recover",
            ][i % 3].format(s=name)
            team = S[name]["team"]
            m.append(
                self.row(
                    q,
                    2,
                    [f"restart:{name}", f"service:{name}", f"team:{team}"],
                    self.teams[team]["pager"],
                )
            )
        # hop 2: service -> team -> lead (time zone)
        for i, name in enumerate(SERVICES[5:40:9]):
            team = S[name]["team"]
            lead = self.teams[team]["lead"]
            q = [
                "What time zone is the lead of the team on call for {s} in?",
                "{s} owning team lead time zone",
            ][i % 2].format(s=name)
            m.append(
                self.row(
                    q,
                    2,
                    [f"service:{name}", f"team:{team}", f"person:{lead}"],
                    self.people[lead]["answer"],
                )
            )
        # hop 2: service -> datastore -> Backup Policy (retention)
        picked = [n for n in SERVICES if self.distinct(n)][4:40:7]
        for i, name in enumerate(picked):
            store = S[name]["store"]
            q = [
                "How many days of backups do we keep for {s} data?",
                "{s} data backup retention",
                "how far back can we restore {s} state",
            ][i % 3].format(s=name)
            m.append(
                self.row(
                    q,
                    2,
                    [f"service:{name}", f"store:{store}", "policy:Backup Policy"],
                    TIER_RETENTION[self.datastores[store]["tier"]],
                )
            )
        # hop 2: incident -> service -> team (Slack channel)
        for i, inc in enumerate(self.incidents[4:36:8]):
            team = S[inc["service"]]["team"]
            q = [
                "Which chat channel should follow-ups of the {i} go to?",
                "{i} follow-ups: where to ask",
            ][i % 2].format(i=inc["title"])
            m.append(
                self.row(
                    q,
                    2,
                    [f"incident:{inc['n']}", f"service:{inc['service']}", f"team:{team}"],
                    self.teams[team]["slack_line"],
                )
            )
        self.multi = m

        s: list[dict] = []
        for i, name in enumerate(SERVICES[3:40:7]):
            q = ["What port does {s} listen on?", "{s} port"][i % 2].format(s=name)
            s.append(self.row(q, 0, [f"service:{name}"], S[name]["port_line"]))
        for i, name in enumerate(SERVICES[6:40:9]):
            q = ["What language is {s} written in?", "{s} programming language"][i % 2]
            s.append(self.row(q.format(s=name), 0, [f"service:{name}"], S[name]["lang_line"]))
        for i, animal in enumerate(TEAMS[::3]):
            q = ["What is the pager alias of Team {t}?", "Team {t} pagerduty alias"][i % 2]
            s.append(
                self.row(q.format(t=animal), 0, [f"team:{animal}"], self.teams[animal]["pager"])
            )
        for i, animal in enumerate(TEAMS[1::3]):
            q = ["When does Team {t} hand over on-call?", "Team {t} rotation handover day"][i % 2]
            s.append(
                self.row(q.format(t=animal), 0, [f"team:{animal}"], self.teams[animal]["handover"])
            )
        for i, name in enumerate(PEOPLE[2::6]):
            q = ["What time zone is {p} in?", "{p} working hours time zone"][i % 2]
            s.append(self.row(q.format(p=name), 0, [f"person:{name}"], self.people[name]["answer"]))
        for i, name in enumerate(list(self.datastores)[1::3]):
            q = ["What is {d} running on?", "{d} engine and host"][i % 2]
            s.append(
                self.row(
                    q.format(d=name), 0, [f"store:{name}"], self.datastores[name]["engine_line"]
                )
            )
        for i, adr in enumerate(self.adrs[20:40:5]):
            q = ["What did {a} decide?", "{a} decision"][i % 2].format(a=adr["title"])
            s.append(self.row(q, 0, [f"adr:{adr['n']}"], adr["decision"]))
        for i, inc in enumerate(self.incidents[1:36:9]):
            q = ["How long did the {i} last?", "{i} duration of customer impact"][i % 2]
            s.append(
                self.row(q.format(i=inc["title"]), 0, [f"incident:{inc['n']}"], inc["duration"])
            )
        for i, inc in enumerate(self.incidents[3:36:9]):
            q = ["What caused the {i}?", "{i} root cause"][i % 2].format(i=inc["title"])
            s.append(self.row(q, 0, [f"incident:{inc['n']}"], inc["cause_line"]))
        ops = [x for x in self.meetings if x["kind"] in ("Ops Sync", "Planning")]
        for i, meeting in enumerate(ops[1:28:7]):
            person, _task, line = meeting["actions"][0]
            q = ["At the {m}, what did {p} take on?", "{m} action item for {p}"][i % 2]
            s.append(
                self.row(
                    q.format(m=meeting["title"], p=person), 0, [f"meeting:{meeting['n']}"], line
                )
            )
        for i, (term, definition) in enumerate(GLOSSARY[4:40:9]):
            q = ["What does {t} mean?", "definition of {t}"][i % 2].format(t=term.lower())
            s.append(self.row(q, 0, [f"term:{term}"], f"{term} means {definition}."))
        s.append(
            self.row(
                "How long are application logs kept?",
                0,
                ["policy:Log Retention Policy"],
                "Application logs are kept for 30 days in the log store.",
            )
        )
        s.append(
            self.row(
                "how many approvers for a production database change",
                0,
                ["policy:Change Approval Policy"],
                "Changes to production databases need two approvers from the owning team.",
            )
        )
        s.append(
            self.row(
                "When is the Black Friday deploy freeze?",
                0,
                ["policy:Deploy Freeze Policy"],
                "Production deploys are frozen from 20 November to 2 December for "
                "the Black Friday peak",
            )
        )
        s.append(
            self.row(
                "access review: when is unconfirmed access removed",
                0,
                ["policy:Access Review Policy"],
                "Access not confirmed within ten working days is removed.",
            )
        )
        self.single = s

        u: list[dict] = []

        def un(question: str, key: str, why: str) -> None:
            u.append({"question": question, "near": self.notes[key].path, "why": why})

        for name in SERVICES[2:40:10]:
            un(
                f"What gRPC port does {name} expose?",
                f"service:{name}",
                "Service pages give one cluster port only; no gRPC port is documented.",
            )
        for name in PEOPLE[1:26:7]:
            un(
                f"What is {name}'s phone number?",
                f"person:{name}",
                "People pages give city, time zone and role, never a phone number.",
            )
        for inc in self.incidents[5:36:9]:
            un(
                f"How much revenue did we lose in the {inc['title']}?",
                f"incident:{inc['n']}",
                "Postmortems give duration, severity and cause, not revenue.",
            )
        for animal in TEAMS[2::3]:
            un(
                f"Who is the secondary on-call for Team {animal}?",
                f"team:{animal}",
                "Team pages give the pager alias and handover, not a secondary on-call.",
            )
        for name in list(self.datastores)[::3]:
            un(
                f"Which EC2 instance type does {name} run on?",
                f"store:{name}",
                "Datastore pages give engine, host name and size, not the instance type.",
            )
        un(
            "What are the steps in the Payments Gateway Runbook?",
            "service:Checkout Gateway",
            "Checkout Gateway links [[Payments Gateway Runbook]], which does not exist.",
        )
        un(
            "What does the Capacity Model 2027 project for Pricing Engine traffic?",
            "service:Pricing Engine",
            "Pricing Engine links [[Capacity Model 2027]], which does not exist.",
        )
        un(
            "Who is the account manager on the Vendor Contacts page?",
            "policy:Vendor Security Review",
            "Vendor Security Review links [[Vendor Contacts]], which does not exist.",
        )
        un(
            "What is the acknowledge time for a SEV4 incident?",
            "policy:Incident Severity Levels",
            "Only SEV1 to SEV3 are defined.",
        )
        un(
            "How long are debug logs kept?",
            "policy:Log Retention Policy",
            "Only application, audit and load balancer access logs have a retention.",
        )
        un(
            "How long are Tier 4 backups kept?",
            "policy:Backup Policy",
            "The Backup Policy defines tiers 1 to 3 only.",
        )
        for adr in self.adrs[1:40:10]:
            un(
                f"Which ADR superseded {adr['title']}?",
                f"adr:{adr['n']}",
                "No ADR is marked superseded.",
            )
        for meeting in [x for x in self.meetings if x["kind"] == "Planning"][:3]:
            un(
                f"What budget was approved at the {meeting['title']}?",
                f"meeting:{meeting['n']}",
                "Meeting notes never mention budgets.",
            )
        self.unanswerable = u
        del rng


def number(rows: list[dict], prefix: str) -> list[dict]:
    """Ids and the split: even index in file order is `tune`, odd is `holdout`."""
    out = []
    for index, row in enumerate(rows):
        out.append(
            {
                "id": f"{prefix}-{index + 1:03d}",
                "question": row["question"],
                "split": "tune" if index % 2 == 0 else "holdout",
                **{k: v for k, v in row.items() if k != "question"},
            }
        )
    return out


def write(corpus_dir: Path, questions_dir: Path) -> Corpus:
    corpus = Corpus()
    corpus.build()
    corpus.questions()
    if corpus_dir.exists():
        shutil.rmtree(corpus_dir)
    for note in corpus.notes.values():
        words = len(note.text().split())
        assert MIN_WORDS <= words <= MAX_WORDS, (note.path, words)
        target = corpus_dir / note.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(note.text(), encoding="utf-8", newline="\n")
    questions_dir.mkdir(parents=True, exist_ok=True)
    sets = {
        "multi_hop": number(corpus.multi, "link-m"),
        "single_hop": number(corpus.single, "link-s"),
        "unanswerable": number(corpus.unanswerable, "link-u"),
    }
    for name, rows in sets.items():
        lines = [json.dumps(row, ensure_ascii=False) for row in rows]
        (questions_dir / f"{name}.jsonl").write_text(
            "\n".join(lines) + "\n", encoding="utf-8", newline="\n"
        )
    return corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS_DIR)
    parser.add_argument("--questions", type=Path, default=QUESTIONS_DIR)
    args = parser.parse_args()
    corpus = write(args.corpus, args.questions)
    print(
        f"{len(corpus.notes)} notes in {args.corpus}; {len(corpus.multi)} multi-hop, "
        f"{len(corpus.single)} single-hop, {len(corpus.unanswerable)} unanswerable questions "
        f"in {args.questions}"
    )


if __name__ == "__main__":
    main()
