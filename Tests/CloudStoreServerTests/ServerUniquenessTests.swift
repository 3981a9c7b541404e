import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

/// Uniqueness constraints of record types over HTTP (WireProtocol.md §3, "Uniqueness
/// constraints"), on every backend: declared with schema/modify, enforced per zone by
/// records/modify with `UNIQUE_FIELD_ERROR` and the record that holds the values, and checked
/// against the records already stored when declared.
@Suite("uniqueness constraints: declared, enforced per zone, checked against stored records")
struct ServerUniquenessTests {
    static let lists = CloudSchema(recordTypes: [
        .init(
            name: "List",
            fields: [.init(name: "title", type: .string), .init(name: "owner", type: .reference), .init(name: "due", type: .timestamp)],
            uniquenessConstraints: [["title"], ["owner", "due"]])
    ])

    /// The Lists schema without constraints: what the records of a type had before one was declared.
    static var unconstrained: CloudSchema {
        var schema = lists
        schema.recordTypes[0].uniquenessConstraints = nil
        return schema
    }

    func declare(_ client: CloudClient, _ schema: CloudSchema = Self.lists) async throws -> Answer {
        try await client.send(.POST, client.basePath + "/schema/modify", body: try WireCoding.encode(schema))
    }

    func schema(_ client: CloudClient) async throws -> CloudSchema {
        try await client.send(.GET, client.basePath + "/schema").decode(CloudSchema.self)
    }

    func list(_ name: String, _ title: String? = nil, tag: String? = nil, _ fields: [String: FieldValue] = [:]) -> Record {
        var record = Record(recordName: name, recordType: "List", recordChangeTag: tag, fields: fields)
        if let title { record.fields["title"] = .string(title) }
        return record
    }

    /// Creates each record on its own (not atomic) and answers the code of each result, nil when saved.
    func create(_ client: CloudClient, _ records: [Record], in zone: String = "Lists") async throws -> [ServerErrorCode?] {
        let (status, results) = try await client.modify(zone, records.map { .init(.create, $0) }, atomic: false)
        #expect(status == 200)
        return results.map(\.code)
    }

    @Test(arguments: Backend.all)
    func aSecondRecordWithTheValues_failsWithTheRecordThatHasThem_andAnotherZoneMayHaveThem(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let declared = try await declare(client)
            #expect(declared.status == 200, "\(declared.text)")
            #expect(declared.text.contains(#""uniquenessConstraints":[["title"],["owner","due"]]"#), "\(declared.text)")
            #expect(try await schema(client).recordType(named: "List")?.uniquenessConstraints == [["title"], ["owner", "due"]])
            try await client.createZone("Lists")
            try await client.createZone("Other")
            try await client.save("Lists", [list("L1", "Groceries")])

            let answer = try await client.call(
                .private, .recordsModify,
                RecordsModifyRequest(
                    zoneID: ZoneID(zoneName: "Lists"), atomic: false,
                    operations: [.init(.create, list("L2", "Groceries")), .init(.create, list("L3", "Food"))]))
            #expect(answer.status == 200)
            #expect(answer.text.contains(#""serverErrorCode":"UNIQUE_FIELD_ERROR""#), "\(answer.text)")
            let results = try answer.decode(RecordsResponse.self).records
            let error = try #require(results[0].error)
            #expect(error.serverErrorCode == .uniqueFieldError && error.recordName == "L2")
            #expect(
                error.reason
                    == #"record L2 cannot have title = "Groceries": record L1 in zone Lists already has it (uniqueness constraint [title]); merge into L1 or change the value"#
            )
            #expect(error.serverRecord?.recordName == "L1" && error.serverRecord?.fields["title"] == "Groceries")
            #expect(error.serverRecord?.recordChangeTag != nil, "the holder as stored, with its tag to merge with")
            #expect(results[1].value?.recordName == "L3")
            #expect(try await client.lookup("Lists", ["L2"]).first?.code == .notFound, "nothing stored")

            let (atomicStatus, atomic) = try await client.modify(
                "Lists", [.init(.create, list("L4", "Groceries")), .init(.create, list("L5", "Other"))], atomic: true)
            #expect(atomicStatus == 400 && atomic.map(\.code) == [.uniqueFieldError, .atomicError])

            #expect(try await create(client, [list("L2", "Groceries")], in: "Other") == [nil], "another zone may have the title")
        }
    }

    /// Keys follow updates and deletes: a record that changes or deletes its values frees them
    /// (also for a later operation of the same request), a record may save its own values again,
    /// and deleting the zone frees every value of it.
    @Test(arguments: Backend.all)
    func updatesAndDeletes_moveAndFreeTheValues(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            #expect(try await declare(client).status == 200)
            try await client.createZone("Lists")
            let saved = try await client.save("Lists", [list("L1", "Groceries"), list("L2", "Food")])

            let (_, taken) = try await client.modify("Lists", [.init(.update, list("L2", "Groceries", tag: saved[1].recordChangeTag))])
            #expect(taken.first?.code == .uniqueFieldError && taken.first?.error?.serverRecord?.recordName == "L1")

            try await client.save("Lists", [list("L1", "Hardware", tag: saved[0].recordChangeTag)], .update)
            #expect(try await create(client, [list("L3", "Groceries"), list("L4", "Hardware")]) == [nil, .uniqueFieldError])
            try await client.save("Lists", [list("L1", "Hardware")], .forceUpdate)
            try await client.save("Lists", [list("L1", "Hardware", tag: nil, ["due": .timestamp(Date(millisecondsSince1970: 1))])], .forceReplace)

            try await client.save("Lists", [Record(recordName: "L3")], .forceDelete)
            #expect(try await create(client, [list("L5", "Groceries")]) == [nil], "a deleted record frees its values")

            let (status, inOrder) = try await client.modify(
                "Lists", [.init(.forceUpdate, list("L1", "Tools")), .init(.create, list("L6", "Hardware"))])
            #expect(status == 200 && inOrder.map(\.code) == [nil, nil], "an earlier operation frees the values for a later one")

            _ = try await client.call(.private, .zonesModify, ZonesModifyRequest(operations: [.init(.delete, ZoneID(zoneName: "Lists"))]))
            try await client.createZone("Lists")
            #expect(try await create(client, [list("L7", "Groceries"), list("L8", "Tools")]) == [nil, nil], "a deleted zone frees its values")
        }
    }

    /// A missing or null value collides with nothing (as in SQL); a reference counts by its record
    /// name, whatever its action; a value sent without a type collides once the schema types it.
    @Test(arguments: Backend.all)
    func missingAndNullValuesNeverCollide_referencesByName_untypedValuesAsTheSchemaTypesThem(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            #expect(try await declare(client).status == 200)
            try await client.createZone("Lists")
            let owner = FieldValue.reference(Reference(recordName: "U-1"))
            let due = FieldValue.timestamp(Date(millisecondsSince1970: 1_767_225_600_000))
            #expect(try await create(client, [list("L1"), list("L2"), list("L3", nil, ["title": .null])]) == [nil, nil, nil])
            #expect(try await create(client, [list("L4", nil, ["owner": owner]), list("L5", nil, ["owner": owner])]) == [nil, nil])
            #expect(try await create(client, [list("L6", nil, ["owner": owner, "due": due]), list("L7", nil, ["owner": owner, "due": due])]) == [nil, .uniqueFieldError])
            let deleteSelf = FieldValue.reference(Reference(recordName: "U-1", action: .deleteSelf))
            let other = FieldValue.reference(Reference(recordName: "U-2"))
            #expect(try await create(client, [list("L8", nil, ["owner": deleteSelf, "due": due]), list("L9", nil, ["owner": other, "due": due])]) == [.uniqueFieldError, nil])

            let untyped = try await client.call(
                .private, .recordsModify,
                json: #"{"zoneID": {"zoneName": "Lists"}, "atomic": false, "operations": [{"operationType": "create", "record": {"recordName": "L10", "recordType": "List", "fields": {"owner": {"value": {"recordName": "U-1"}, "type": "REFERENCE"}, "due": {"value": 1767225600000}}}}]}"#)
            #expect(try untyped.decode(RecordsResponse.self).records.first?.error?.serverErrorCode == .uniqueFieldError, "\(untyped.text)")
        }
    }

    /// Declaring a constraint checks the records stored in every zone of every user: two records
    /// of one zone with the same values refuse the change, which stores nothing; once they differ,
    /// the declaration keys every record, so later saves meet them. Removing the constraint frees
    /// the values; saves that extend the schema keep the constraints.
    @Test(arguments: Backend.all)
    func declaringAConstraintOverStoredRecords_refusesDuplicatesAndKeysEveryRecord(_ backend: Backend) async throws {
        try await withServer(backend) { _, alice in
            let bob = alice.asUser("bob-token", device: "device-B")
            #expect(try await declare(alice, Self.unconstrained).status == 200)
            for client in [alice, bob] {
                try await client.createZone("Lists")
                try await client.createZone("Other")
            }
            try await alice.save("Lists", [list("L1", "Groceries"), list("L2", "Groceries"), list("L3", "Food")])
            try await alice.save("Other", [list("O1", "Groceries")])
            try await bob.save("Lists", [list("B1", "Groceries")])
            let before = try await schema(alice)

            let refused = try await declare(alice)
            #expect(refused.status == 409, "\(refused.text)")
            #expect(refused.error?.serverErrorCode == .uniqueFieldError)
            #expect(
                refused.error?.reason
                    == "record type List cannot have uniqueness constraint [title]: records L1 and L2 in zone Lists both have the same title; change or delete one of them (or merge them), then declare the constraint again"
            )
            #expect(try await schema(alice) == before, "nothing stored")
            #expect(try await create(alice, [list("L4", "Food")]) == [nil], "no key was kept from the refused change")

            try await alice.save("Lists", [Record(recordName: "L2"), Record(recordName: "L4")], .forceDelete)
            let declared = try await declare(alice)
            #expect(declared.status == 200, "\(declared.text)")
            let (_, held) = try await alice.modify("Lists", [.init(.create, list("L5", "Groceries"))], atomic: false)
            #expect(held.first?.code == .uniqueFieldError && held.first?.error?.serverRecord?.recordName == "L1")
            #expect(try await create(alice, [list("O2", "Groceries")], in: "Other") == [.uniqueFieldError])
            #expect(try await create(bob, [list("B2", "Groceries")]) == [.uniqueFieldError], "every user's zones were keyed")

            let version = try await schema(alice).version
            try await alice.save("Lists", [list("L6", "Misc", ["color": "red"])])
            let grown = try await schema(alice)
            #expect(grown.version == (version ?? 0) + 1 && grown.recordType(named: "List")?.field(named: "color") != nil)
            #expect(grown.recordType(named: "List")?.uniquenessConstraints == [["title"], ["owner", "due"]], "saves keep constraints")

            var without = grown
            without.version = nil
            without.recordTypes[0].uniquenessConstraints = nil
            #expect(try await declare(alice, without).status == 200)
            #expect(try await create(alice, [list("L7", "Groceries")]) == [nil], "without the constraint the title is free")
            #expect(try await declare(alice).status == 409, "and declaring it again finds L1 and L7")
        }
    }

    @Test(arguments: Backend.all)
    func schemaModify_refusesAConstraintThatCannotHold_namingTheField(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            var schema = Self.lists
            schema.recordTypes[0].fields.append(.init(name: "photo", type: .asset))
            schema.recordTypes[0].uniquenessConstraints = [["title", "photo"]]
            let refused = try await declare(client, schema)
            #expect(refused.status == 400 && refused.error?.serverErrorCode == .badRequest)
            #expect(refused.error?.reason?.contains("field List.photo, which is ASSETID") == true, "\(refused.text)")
            schema.recordTypes[0].uniquenessConstraints = [["titel"]]
            #expect(try await declare(client, schema).error?.reason?.contains("names field titel, which List does not declare") == true)
            #expect(try await self.schema(client).version == 0)
        }
    }
}
