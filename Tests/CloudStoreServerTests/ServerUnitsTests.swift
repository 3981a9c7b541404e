import CloudStoreTesting
import CloudStoreWire
import Crypto
import Foundation
import GRDB
import Logging
import Testing

@testable import CloudStoreServer

@Suite("server building blocks")
struct ServerUnitsTests {
    let partition = DatabasePartition(container: "c", environment: .development, scope: .private, owner: "_u1")

    /// What a value sent without a type becomes as the type the schema declares (nil: refused).
    @Test(arguments: [
        (FieldValue.int64(1_767_225_600_000), FieldType.timestamp, FieldValue?.some(.timestamp(Date(millisecondsSince1970: 1_767_225_600_000)))),
        (.double(1_500.6), .timestamp, .timestamp(Date(millisecondsSince1970: 1_501))),
        (.int64(8_640_000_000_000_001), .timestamp, nil),
        (.double(9e15), .timestamp, nil),
        (.int64(2), .double, .double(2)),
        (.double(2.5), .int64, nil),
        (.string("aGk="), .bytes, .bytes(Data("hi".utf8))),
        (.string("not base64!"), .bytes, nil),
        (.string("12"), .int64, nil),
        (.string("x"), .string, .string("x")),
        (.list([.int64(1), .int64(2)]), .list(.timestamp), .list([.timestamp(Date(millisecondsSince1970: 1)), .timestamp(Date(millisecondsSince1970: 2))])),
        (.list([.string("aGk="), .string("%")]), .list(.bytes), nil),
        (.list([]), .list(.double), .list([])),
        (.int64(1), .reference, nil),
    ])
    func schemaRules_retypeUntypedValues(_ value: FieldValue, _ declared: FieldType, _ expected: FieldValue?) {
        #expect(SchemaRules.retype(value, as: declared) == expected)
    }

    @Test func schemaRules_typedConvertsOnlyUntypedMisfitsAndNamesTheFirstThatCannotBe() throws {
        let schema = CloudSchema(recordTypes: [
            .init(name: "Event", fields: [.init(name: "at", type: .timestamp), .init(name: "b", type: .bytes)])
        ])
        let fields: [String: FieldValue] = ["at": .int64(5), "b": .string("aGk="), "new": .int64(1)]
        let all = SchemaRules.typed(fields, recordType: "Event", schema: schema, isUntyped: { _ in true })
        #expect(try all.get() == ["at": .timestamp(Date(millisecondsSince1970: 5)), "b": .bytes(Data("hi".utf8)), "new": .int64(1)])
        var asked: [String] = []
        let typedOnes = SchemaRules.typed(fields, recordType: "Event", schema: schema, isUntyped: { asked.append($0); return false })
        #expect(try typedOnes.get() == fields, "values sent with a type are left for admit to judge")
        #expect(asked.sorted() == ["at", "b"], "only misfits are asked about")
        let bad = SchemaRules.typed(["b": .string("%%"), "at": .string("x")], recordType: "Event", schema: schema, isUntyped: { _ in true })
        guard case .failure(let misfit) = bad else { Issue.record("expected a misfit"); return }
        #expect(misfit.reason.hasPrefix("field Event.at is TIMESTAMP in the schema"), "the first misfit by name")
        #expect(try SchemaRules.typed(fields, recordType: "Other", schema: schema, isUntyped: { _ in true }).get() == fields)
    }

    @Test func configuration_refusesUsersNamedLikeCallersThatAreNotUsers() {
        for name in ["_serverKey_k1", "_apiToken_web", "_operator", "_defaultOwner", ""] {
            #expect(ServerConfiguration.usersProblem(["t": name]) != nil, "\(name)")
        }
        #expect(ServerConfiguration.usersProblem(["t": "_alice", "u": "serverKey_k"]) == nil)
    }

    @Test func syncToken_roundTripsAndRefusesForeignOrMalformedTokens() throws {
        let zone = partition.zone("Notes")
        let stored = StoredZone(name: "Notes", seq: 9, dbSeq: 3, incarnation: 4, purgedThrough: 0, deleted: false)
        let token = SyncToken.zone(zone, stored, seq: 7)
        let decoded = try SyncToken.decode(token.encoded, as: .zone)
        #expect(decoded == token)
        try decoded.checkBelongs(to: zone)
        #expect(throws: APIError.self) { try decoded.checkBelongs(to: partition.zone("Other")) }
        var otherUser = partition
        otherUser.owner = "_u2"
        #expect(throws: APIError.self) { try decoded.checkBelongs(to: otherUser.zone("Notes")) }
        #expect(throws: APIError.self) { try SyncToken.decode(token.encoded, as: .database) }
        #expect(throws: APIError.self) { try SyncToken.decode(String(token.encoded.dropLast(2)), as: .zone) }
        #expect(!token.encoded.contains("+") && !token.encoded.contains("/") && !token.encoded.contains("="))

        let database = SyncToken.database(partition, seq: 5)
        #expect(try SyncToken.decode(database.encoded, as: .database).seq == 5)
    }

    @Test func rateLimiterBucket_refillsAtTheRate() {
        let start = Date(timeIntervalSince1970: 0)
        var bucket = RateLimiter.Bucket(tokens: 2, updated: start)
        #expect(bucket.take(now: start, rate: 2) == nil)
        #expect(bucket.take(now: start, rate: 2) == nil)
        #expect(bucket.take(now: start, rate: 2) == 0.5)
        #expect(bucket.take(now: start.addingTimeInterval(0.25), rate: 2) == 0.25)
        #expect(bucket.take(now: start.addingTimeInterval(0.5), rate: 2) == nil)
        #expect(bucket.take(now: start.addingTimeInterval(100), rate: 2) == nil, "never more than one second of burst")
        #expect(bucket.take(now: start.addingTimeInterval(100), rate: 2) == nil)
        #expect(bucket.take(now: start.addingTimeInterval(100), rate: 2) != nil)
    }

    /// The wait has no timeout: a lost change would hang it until the time limit fails the test.
    @Test(.timeLimit(.minutes(ReliabilityRun.hangLimitMinutes))) func changeBroker_doesNotLoseAChangePublishedBeforeTheWait() async {
        let broker = ChangeBroker()
        let subscription = broker.subscribe("p")
        broker.publish("p")
        #expect(broker.hasChanged(subscription))
        await broker.waitForChange(subscription)
        broker.unsubscribe(subscription)
    }

    @Test func changeBroker_wakesWaitersOfThePartitionOnly() async {
        let broker = ChangeBroker()
        let mine = broker.subscribe("p")
        let theirs = broker.subscribe("q")
        broker.publish("q")
        #expect(!broker.hasChanged(mine))
        #expect(broker.hasChanged(theirs))
        async let waited: Void = broker.wait(mine, timeout: .seconds(30))
        broker.publish("p")
        await waited
        #expect(broker.hasChanged(mine))
        broker.unsubscribe(mine)
        broker.unsubscribe(theirs)
    }

    @Test func changeBroker_timesOut() async {
        let broker = ChangeBroker()
        let subscription = broker.subscribe("p")
        await broker.wait(subscription, timeout: .milliseconds(10))
        #expect(!broker.hasChanged(subscription))
        broker.unsubscribe(subscription)
    }

    @Test func schemaRules_productionRefusesRemovalAndRetype() throws {
        let current = CloudSchema(recordTypes: [.init(name: "Note", fields: [.init(name: "title", type: .string)])], version: 3)
        let removal = CloudSchema(recordTypes: [.init(name: "Note", fields: [])])
        #expect(throws: APIError.self) { try SchemaRules.merge(removal, into: current, environment: .production) }
        let development = try SchemaRules.merge(removal, into: current, environment: .development)
        #expect(development?.version == 4)
        #expect(try SchemaRules.merge(current, into: current, environment: .production) == nil)
        let duplicate = CloudSchema(recordTypes: [.init(name: "Note", fields: []), .init(name: "Note", fields: [])])
        #expect(throws: APIError.self) { try SchemaRules.merge(duplicate, into: .empty, environment: .development) }
    }

    /// The rules look for problems without sorting a record's fields, yet answer the first bad
    /// field by name whatever order the dictionary holds them in (40 bad fields inserted shuffled).
    @Test func recordAndAssetRules_answerTheFirstBadFieldByName() throws {
        let names = (0..<40).map { String(format: "f%02d", $0) }
        var unknownTypes: [String: FieldValue] = [:]
        var unknownAssets: [String: FieldValue] = [:]
        for name in names.shuffled() {
            unknownTypes[name] = .unknown(type: "T_\(name)", value: .null)
            unknownAssets[name] = .asset(Asset(fileChecksum: "c_\(name)", size: 1))
        }
        let records = RecordRules(zone: partition.zone("Notes"), maxRecordBytes: 1 << 20)
        let error = try #require(records.check(Record(recordName: "N-1", recordType: "Note", fields: unknownTypes)))
        #expect(error.reason?.hasPrefix("field f00 has unknown type T_f00") == true, "\(error)")
        #expect(records.check(Record(recordName: "N-1", recordType: "Note", fields: ["title": "x", "count": 3])) == nil)

        let assets = AssetRules(zone: partition.zone("Notes"), caller: "_u1", now: Date())
        guard case .failure(let problem) = assets.resolve(unknownAssets, recordName: "N-1", stored: nil, receipts: [:]) else {
            Issue.record("assets that no field stores were accepted")
            return
        }
        #expect(problem.reason.hasPrefix("field f00: the asset (fileChecksum c_f00,"), "\(problem.reason)")
    }

    /// A record that fits its type as it is leaves the schema untouched (decided without sorting);
    /// new fields join in name order, and in production the first misfit by name is answered.
    @Test func schemaRules_admitLeavesAFittingSchemaAloneAndAddsNewFieldsInNameOrder() {
        var schema = CloudSchema(
            recordTypes: [.init(name: "Note", fields: [.init(name: "title", type: .string), .init(name: "count", type: .int64)])])
        let before = schema
        #expect(SchemaRules.admit(recordType: "Note", fields: ["title": "x", "count": 3], into: &schema, environment: .production) == nil)
        #expect(schema == before)
        #expect(SchemaRules.admit(recordType: "Note", fields: ["title": "x", "zeta": 1, "alpha": "a"], into: &schema, environment: .development) == nil)
        #expect(schema.recordTypes[0].fields.map(\.name) == ["title", "count", "alpha", "zeta"])
        let misfit = SchemaRules.admit(recordType: "Note", fields: ["new2": 1, "new1": 2, "title": "x"], into: &schema, environment: .production)
        #expect(misfit == "field Note.new1 is not in the production schema: add it with schema/modify")
    }

    @Test func limits_pageSizeClampsAndRefusesNonPositive() throws {
        let limits = ServerLimits()
        #expect(try limits.pageSize(nil) == 200)
        #expect(try limits.pageSize(50) == 50)
        #expect(try limits.pageSize(Int.max) == 200)
        #expect(throws: APIError.self) { try limits.pageSize(0) }
        #expect(throws: APIError.self) { try limits.pageSize(-1) }
    }

    @Test func limits_thatCannotWorkAreAConfigurationError() {
        #expect(throws: ServerConfigurationError.self) { try ServerLimits(maxOperations: 0).validate() }
        #expect(throws: ServerConfigurationError.self) { try ServerLimits(requestsPerSecondPerUser: 0).validate() }
        #expect(throws: ServerConfigurationError.self) { try ServerLimits(maxLongPollSeconds: -1).validate() }
        #expect(throws: Never.self) { try ServerLimits().validate() }
    }

    @Test func bearerTokens_matchExactly() {
        let tokens = BearerTokens(["alpha": "_a", "beta": "_b"])
        #expect(tokens.caller(for: "alpha") == .user("_a"))
        #expect(tokens.caller(for: "beta") == .user("_b"))
        #expect(tokens.caller(for: "alph") == nil)
        #expect(tokens.caller(for: "alphaa") == nil)
        #expect(tokens.caller(for: "") == nil)
        #expect(tokens.hasNoUsers == false)
    }

    /// A server key's PEM in any valid layout: OpenSSL's 64 columns, python-ecdsa's 76, one line,
    /// CRLF; anything else is refused with the key named.
    @Test func serverKeys_acceptEveryValidPEMLayout() throws {
        let key = P256.Signing.PrivateKey().publicKey
        let base64 = key.derRepresentation.base64EncodedString()
        func pem(width: Int, newline: String = "\n") -> String {
            var lines = ["-----BEGIN PUBLIC KEY-----"]
            var rest = Substring(base64)
            while !rest.isEmpty {
                lines.append(String(rest.prefix(width)))
                rest = rest.dropFirst(width)
            }
            lines.append("-----END PUBLIC KEY-----")
            return lines.joined(separator: newline) + newline
        }
        for layout in [pem(width: 64), pem(width: 76), pem(width: 1000), pem(width: 76, newline: "\r\n"), "\n  " + pem(width: 64)] {
            #expect(try ServerKeys.publicKey(pem: layout).derRepresentation == key.derRepresentation, "\(layout)")
        }
        #expect(throws: ServerConfigurationError.self) { try ServerKeys(["k1": "-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----"]) }
    }

    @Test func bearerTokens_theOperatorTokenIsTheOperatorsAndNoUsers() {
        let tokens = BearerTokens([:], operatorToken: "root")
        #expect(tokens.caller(for: "root") == .operator)
        #expect(tokens.caller(for: "roo") == nil)
        #expect(tokens.hasNoUsers)
    }

    /// An acknowledged write survives a power loss: GRDB's `DatabasePool` sets `synchronous =
    /// NORMAL` on its writer when it turns WAL on, so the storage sets `FULL` again; read back from
    /// the writer and a reader of a container's file.
    @Test func sqliteStorage_synchronousIsFullOnTheWriterAndTheReaders() throws {
        let directory = try TemporaryDirectory(prefix: "cloudstore-sync")
        defer { withExtendedLifetime(directory) {} }
        let storage = SQLiteStorage(directory: directory.url, logger: Logger(label: "test"))
        let pool = try storage.pool("iCloud.durability")
        let writer = try pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        let reader = try pool.read { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        #expect(writer == 2 && reader == 2, "writer \(writer ?? -1), reader \(reader ?? -1)")
        try pool.close()
    }
}
