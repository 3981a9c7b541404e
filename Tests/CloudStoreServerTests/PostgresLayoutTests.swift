import Testing

@testable import CloudStoreServer

/// What a PostgreSQL server runs at start (``PostgresLayout/plan(_:)``), decided without PostgreSQL.
@Suite("PostgreSQL layout: what a start runs")
struct PostgresLayoutTests {
    let layout = PostgresLayout(schema: "app")

    /// Every object of the layout, by name.
    var everything: Set<String> { Set(layout.steps.dropFirst().map(\.name)) }

    func number(of name: String) throws -> Int {
        try #require(layout.steps.firstIndex { $0.name == name }) + 1
    }

    @Test func currentVersion_runsNothing() {
        let found = PostgresLayout.Found(schemaExists: true, relations: everything, version: layout.version)
        #expect(layout.plan(found) == .current(version: layout.version))
    }

    /// An instance of an earlier release restarting after a later one upgraded: the later layout
    /// only added to its own, so it starts without DDL.
    @Test func aLaterReleasesVersion_runsNothingOnAnEarlierRelease() {
        let earlier = layout.prefix(layout.version - 1)
        #expect(earlier.plan(PostgresLayout.Found(schemaExists: true, relations: everything, version: layout.version))
            == .current(version: layout.version))
    }

    @Test func anEmptyDatabase_runsEveryStepInOrder_eachInItsTransaction() {
        let plan = layout.plan(PostgresLayout.Found(schemaExists: false))
        #expect(plan == .upgrade(from: nil, steps: (1...layout.version).map { PostgresLayout.PlannedStep(number: $0) }))
    }

    /// A database the release before layout versions prepared: everything is there but the
    /// version table, which is the one step run; no index is built again, nothing else is locked.
    @Test func aCompleteUnversionedLayout_onlyCreatesTheVersionTable() throws {
        var relations = everything
        relations.remove(PostgresLayout.versionTable)
        let plan = layout.plan(PostgresLayout.Found(schemaExists: true, relations: relations))
        #expect(plan == .upgrade(from: nil, steps: [PostgresLayout.PlannedStep(number: try number(of: PostgresLayout.versionTable))]))
    }

    /// A database of a release from before sharing and the record key index: the missing tables
    /// are created with their indexes in their transactions, and the new index on the existing
    /// record table is built concurrently, so writes to it go on.
    @Test func aPartialUnversionedLayout_completesWhatIsMissing_indexingExistingTablesConcurrently() throws {
        let missing: Set<String> = [
            PostgresLayout.versionTable, "cloudstore_share", "cloudstore_share_participant",
            "cloudstore_share_participant_by_db_seq", "cloudstore_record_by_key",
        ]
        let plan = layout.plan(PostgresLayout.Found(schemaExists: true, relations: everything.subtracting(missing)))
        let expected = try [
            PostgresLayout.PlannedStep(number: number(of: PostgresLayout.versionTable)),
            PostgresLayout.PlannedStep(number: number(of: "cloudstore_share")),
            PostgresLayout.PlannedStep(number: number(of: "cloudstore_share_participant")),
            PostgresLayout.PlannedStep(number: number(of: "cloudstore_share_participant_by_db_seq")),
            PostgresLayout.PlannedStep(number: number(of: "cloudstore_record_by_key"), concurrently: true),
        ]
        #expect(plan == .upgrade(from: nil, steps: expected))
    }

    /// The steps after the recorded version, an index of an existing table built concurrently.
    @Test func aRecordedVersion_runsTheStepsAfterIt() {
        let found = PostgresLayout.Found(schemaExists: true, relations: everything, version: layout.version - 2)
        #expect(
            layout.plan(found)
                == .upgrade(
                    from: layout.version - 2,
                    steps: [.init(number: layout.version - 1, concurrently: true), .init(number: layout.version)]))
    }

    /// The schema comes first, and errors name the step with its number.
    @Test func aMissingSchema_isTheFirstStep() {
        guard case .upgrade(_, let steps) = layout.plan(PostgresLayout.Found(schemaExists: false)) else {
            Issue.record("an empty database must be upgraded")
            return
        }
        #expect(layout.steps[steps[0].number - 1].object == .schema("app"))
        #expect(layout.describe(steps[0]) == "step 1 of \(layout.version): creating schema app")
    }

    /// Released steps keep their numbers: a database records only how many are done, so editing,
    /// removing or reordering one would make databases skip or repeat a step. New steps go at the end.
    @Test func releasedSteps_keepTheirNumbersAndNames() {
        #expect(
            layout.steps.map(\.description) == [
                "creating schema app", "creating table cloudstore_layout", "creating table cloudstore_partition",
                "creating table cloudstore_zone", "creating index cloudstore_zone_by_db_seq", "creating table cloudstore_record",
                "creating index cloudstore_record_by_seq", "creating index cloudstore_record_by_type",
                "creating index cloudstore_record_tombstones", "creating table cloudstore_reference",
                "creating index cloudstore_reference_by_target", "creating table cloudstore_schema",
                "creating table cloudstore_asset_upload", "creating index cloudstore_asset_upload_by_expiry",
                "creating table cloudstore_asset", "creating index cloudstore_asset_by_record",
                "creating index cloudstore_asset_removable", "creating table cloudstore_asset_chunk",
                "creating table cloudstore_share", "creating table cloudstore_share_participant",
                "creating index cloudstore_share_participant_by_db_seq", "creating unique index cloudstore_record_by_key",
                "creating table cloudstore_record_key", "creating index cloudstore_record_key_by_source",
                "creating table cloudstore_subscription", "creating table cloudstore_notification",
                "creating table cloudstore_push_token", "creating index cloudstore_notification_by_user",
                "creating index cloudstore_notification_by_db_seq", "creating index cloudstore_notification_by_age",
                "creating index cloudstore_subscription_by_record_type", "creating table cloudstore_secret",
            ])
    }

    /// Every step adds something, names it once, and indexes only a table an earlier step made.
    @Test func everyStep_isAdditiveAndIdempotent() {
        var made = Set<String>()
        for step in layout.steps {
            #expect(!made.contains(step.name), "\(step.name) is made twice")
            if case .index(let index) = step.object {
                #expect(made.contains(index.table), "\(index.name) indexes \(index.table) before it exists")
            }
            made.insert(step.name)
            for statement in step.statements(schema: "app") {
                #expect(
                    statement.hasPrefix("CREATE") && statement.contains("IF NOT EXISTS")
                        || statement.hasPrefix("ALTER TABLE \"app\".\(step.name) "),
                    "\(step.description) runs \(statement)")
            }
        }
    }

    @Test func anIndexBuiltConcurrently_saysSo() throws {
        let step = layout.steps[try number(of: "cloudstore_record_by_key") - 1]
        #expect(
            step.statements(schema: "app", concurrently: true)
                == ["CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS cloudstore_record_by_key ON \"app\".cloudstore_record (\(PostgresStorage.recordKeySQL))"])
        #expect(step.statements(schema: "app").first?.contains("CONCURRENTLY") == false)
    }

    @Test func theVersionIsRecordedFromTheVersionTablesStepOn() throws {
        #expect(layout.versionTableStep == (try number(of: PostgresLayout.versionTable)))
        #expect(layout.prefix(1).versionTableStep == nil)
    }
}

/// How the preparation waits out conflicts with live traffic (``PostgresLayout/Retry``).
@Suite("PostgreSQL layout: retrying conflicts")
struct PostgresLayoutRetryTests {
    let retry = PostgresLayout.Retry(
        lockTimeout: .seconds(2), firstDelay: .milliseconds(100), maximumDelay: .seconds(5), giveUpAfter: .seconds(60))

    @Test func delays_doubleUpToTheMaximum() {
        let delays = (1...8).map { retry.delay(afterAttempt: $0, elapsed: .zero, random: 1) }
        #expect(delays == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5].map { Duration.milliseconds(Int($0 * 1000)) })
    }

    /// Instances that conflicted together do not come back together: the delay is between half
    /// and all of the backoff.
    @Test func jitter_spreadsTheDelayOverItsUpperHalf() {
        #expect(retry.delay(afterAttempt: 3, elapsed: .zero, random: 0) == .milliseconds(200))
        #expect(retry.delay(afterAttempt: 3, elapsed: .zero, random: 0.5) == .milliseconds(300))
        #expect(retry.delay(afterAttempt: 3, elapsed: .zero, random: 1) == .milliseconds(400))
    }

    @Test func afterTheLimit_itGivesUp() {
        #expect(retry.delay(afterAttempt: 40, elapsed: .seconds(54), random: 1) == .seconds(5))
        #expect(retry.delay(afterAttempt: 40, elapsed: .seconds(56), random: 1) == nil)
    }
}
