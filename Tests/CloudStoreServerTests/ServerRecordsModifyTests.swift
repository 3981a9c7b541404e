import CloudStoreTesting
import CloudStoreWire
import Foundation
import Testing

@Suite("records/modify")
struct ServerRecordsModifyTests {
    @Test(arguments: Backend.all)
    func create_storesRecordWithTagZoneAndStamps(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let saved = try await client.save([note("N-1", title: "Hello", extra: ["pinned": .bool(true)])])[0]
            #expect(saved.recordType == "Note")
            #expect(saved.recordChangeTag?.isEmpty == false)
            #expect(saved.zoneID == ZoneID(zoneName: "Notes", ownerRecordName: "_alice"))
            #expect(saved.fields["title"] == .string("Hello"))
            #expect(saved.fields["pinned"] == .int64(1))
            #expect(saved.created?.userRecordName == "_alice")
            #expect(saved.created?.deviceID == "device-A")
            #expect(saved.modified == saved.created)

            let looked = try await client.lookup(["N-1"])
            #expect(looked.first?.value == saved)
        }
    }

    @Test(arguments: Backend.all)
    func create_ofExistingNameIsExistsWithServerRecord(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let saved = try await client.save([note("N-1", title: "first")])[0]
            let (status, results) = try await client.modify([.init(.create, note("N-1", title: "second"))], atomic: false)
            #expect(status == 200)
            let error = try #require(results.first?.error)
            #expect(error.serverErrorCode == .exists)
            #expect(error.recordName == "N-1")
            #expect(error.serverRecord == saved)
        }
    }

    @Test(arguments: Backend.all)
    func update_withStaleTagIsConflictWithServerRecord(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let first = try await client.save([note("N-1", title: "v1")])[0]
            let second = try await client.save([note("N-1", title: "v2", tag: first.recordChangeTag)], .update)[0]
            #expect(second.recordChangeTag != first.recordChangeTag, "the tag changes on every write")

            let (_, results) = try await client.modify(
                [.init(.update, note("N-1", title: "stale", tag: first.recordChangeTag))], atomic: false)
            let error = try #require(results.first?.error)
            #expect(error.serverErrorCode == .conflict)
            #expect(error.serverRecord?.fields["title"] == .string("v2"))
            #expect(error.serverRecord?.recordChangeTag == second.recordChangeTag)

            let (_, missingTag) = try await client.modify([.init(.update, note("N-1", title: "no tag"))], atomic: false)
            #expect(missingTag.first?.code == .conflict, "a missing tag where one is needed is a conflict")
        }
    }

    @Test(arguments: Backend.all)
    func operations_allSevenTypesBehaveAsDocumented(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let base = try await client.save([
                note("U", title: "u", extra: ["body": "keep"]), note("R", title: "r", extra: ["body": "drop"]),
                note("D", title: "d"),
            ])
            var update = Record(recordName: "U", recordChangeTag: base[0].recordChangeTag, fields: ["title": "u2"])
            update.fields["gone"] = .null
            let replace = Record(recordName: "R", recordChangeTag: base[1].recordChangeTag, fields: ["title": "r2"])
            let (status, results) = try await client.modify([
                .init(.update, update),
                .init(.replace, replace),
                .init(.forceUpdate, note("FU", title: "created by forceUpdate")),
                .init(.forceReplace, note("FR", title: "created by forceReplace")),
                .init(.delete, Record(recordName: "D", recordChangeTag: base[2].recordChangeTag)),
                .init(.forceDelete, Record(recordName: "never-existed")),
            ])
            #expect(status == 200)
            #expect(results[0].value?.fields == ["title": "u2", "body": "keep"], "update changes only the fields sent")
            #expect(results[1].value?.fields == ["title": "r2"], "replace drops the fields not sent")
            #expect(results[2].value?.fields["title"] == "created by forceUpdate")
            #expect(results[3].value?.recordType == "Note")
            #expect(results[4].value == Record(recordName: "D", deleted: true))
            #expect(results[5].value == Record(recordName: "never-existed", deleted: true), "forceDelete is idempotent")

            let (_, forced) = try await client.modify([
                .init(.forceUpdate, Record(recordName: "U", fields: ["title": "forced"])),
                .init(.forceReplace, Record(recordName: "R", fields: ["body": "only body"])),
                .init(.forceDelete, Record(recordName: "FU")),
            ])
            #expect(forced[0].value?.fields == ["title": "forced", "body": "keep"])
            #expect(forced[1].value?.fields == ["body": "only body"])
            #expect(forced[2].value?.deleted == true)
            let looked = try await client.lookup(["D", "FU", "FR"])
            #expect(looked.map(\.code) == [.notFound, .notFound, nil])
        }
    }

    @Test(arguments: Backend.all)
    func delete_ofMissingRecordWithTagIsNotFound(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let (_, results) = try await client.modify(
                [.init(.delete, Record(recordName: "ghost", recordChangeTag: "1")), .init(.update, note("ghost2", tag: "1"))],
                atomic: false)
            #expect(results.map(\.code) == [.notFound, .notFound])
        }
    }

    /// A whole `DOUBLE` goes out as `2.0` in every answer that carries the record (the modify's,
    /// a lookup, `changes/zone`), whatever form it came in; typed clients read `2` as an integer.
    @Test(arguments: Backend.all)
    func wholeDouble_isAnsweredWithItsFraction(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let body = #"{"zoneID":{"zoneName":"Notes"},"operations":[{"operationType":"create","record":"#
                + #"{"recordName":"D-1","recordType":"Place","fields":{"rating":{"value":2,"type":"DOUBLE"},"#
                + #""steps":{"value":[1,2.5],"type":"DOUBLE_LIST"},"count":{"value":2,"type":"INT64"}}}}]}"#
            let saved = try await client.send(.POST, client.path(.private, .recordsModify), body: Data(body.utf8))
            let looked = try await client.call(
                .private, .recordsLookup, RecordsLookupRequest(zoneID: ZoneID(zoneName: "Notes"), recordNames: ["D-1"]))
            let changes = try await client.zoneChanges("Notes", token: nil, limit: nil)
            for (name, answer) in [("modify", saved), ("lookup", looked), ("changes/zone", changes)] {
                #expect(answer.status == 200, "\(name): \(answer.text)")
                #expect(answer.text.contains(#""rating":{"type":"DOUBLE","value":2.0}"#), "\(name): \(answer.text)")
                #expect(answer.text.contains(#""steps":{"type":"DOUBLE_LIST","value":[1.0,2.5]}"#), "\(name)")
                #expect(answer.text.contains(#""count":{"type":"INT64","value":2}"#), "\(name)")
            }
        }
    }

    /// In a custom zone a request that omits `atomic` is all-or-nothing.
    @Test(arguments: Backend.all)
    func atomic_failureAppliesNothingAndMarksTheOthersAtomicError(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let existing = try await client.save([note("N-1", title: "v1")])[0]
            let answer = try await client.call(
                .private, .recordsModify,
                RecordsModifyRequest(
                    zoneID: ZoneID(zoneName: "Notes"),
                    operations: [
                        .init(.create, note("A")),
                        .init(.update, note("N-1", title: "stale", tag: "zzz")),
                        .init(.create, note("B")),
                    ]))
            #expect(answer.status == 400)
            let results = try answer.decode(RecordsResponse.self).records
            #expect(results.map(\.code) == [.atomicError, .conflict, .atomicError])
            #expect(results.map(\.error?.recordName) == ["A", "N-1", "B"])
            let looked = try await client.lookup(["A", "N-1", "B"])
            #expect(looked.map(\.code) == [.notFound, nil, .notFound])
            #expect(looked[1].value == existing)
        }
    }

    /// `atomic` "only applies to custom zones": in `_defaultZone`, private or public, a request as
    /// CloudKit JS sends it (no `atomic`, no `zoneID`) with one stale tag and one create answers 200
    /// with `CONFLICT` for the one and the other saved; `atomic: true` there changes nothing.
    @Test(arguments: Backend.all)
    func defaultZone_isNeverAtomic(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            for database in [DatabaseScope.private, .public] {
                for (round, atomic) in ["", #""atomic":true,"#].enumerated() {
                    let saved = try await client.call(
                        database, .recordsModify,
                        RecordsModifyRequest(operations: [.init(.create, note("D-\(round)", title: "v1"))]))
                    #expect(saved.status == 200, "\(saved.text)")
                    let body = #"{\#(atomic)"operations":["#
                        + #"{"operationType":"update","record":{"recordName":"D-\#(round)","recordType":"Note","recordChangeTag":"stale","fields":{"title":{"value":"stale"}}}},"#
                        + #"{"operationType":"create","record":{"recordName":"E-\#(round)","recordType":"Note","fields":{"title":{"value":"new"}}}}]}"#
                    let answer = try await client.send(.POST, client.path(database, .recordsModify), body: Data(body.utf8))
                    #expect(answer.status == 200, "\(database) \(atomic): \(answer.text)")
                    let results = try answer.decode(RecordsResponse.self).records
                    #expect(results.map(\.code) == [.conflict, nil], "\(database) \(atomic)")
                    #expect(results.first?.error?.recordName == "D-\(round)")
                    let looked = try await client.call(
                        database, .recordsLookup, RecordsLookupRequest(recordNames: ["E-\(round)"]))
                    #expect(try looked.decode(RecordsResponse.self).records.first?.value?.fields["title"] == .string("new"))
                }
            }
        }
    }

    @Test(arguments: Backend.all)
    func nonAtomic_partialSuccessAppliesTheGoodOperations(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            try await client.save([note("N-1")])
            let (status, results) = try await client.modify(
                [.init(.create, note("A")), .init(.create, note("N-1")), .init(.create, note("B"))], atomic: false)
            #expect(status == 200)
            #expect(results.map(\.code) == [nil, .exists, nil])
            let looked = try await client.lookup(["A", "B"])
            #expect(looked.allSatisfy { $0.value != nil })
        }
    }

    @Test(arguments: Backend.all)
    func recordNameTwiceInOneRequestIsBadRequest(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let answer = try await client.call(
                .private, .recordsModify,
                RecordsModifyRequest(
                    zoneID: ZoneID(zoneName: "Notes"), operations: [.init(.create, note("A")), .init(.forceUpdate, note("A"))]))
            #expect(answer.status == 400)
            #expect(answer.error?.serverErrorCode == .badRequest)
            #expect(answer.error?.reason?.contains("twice") == true)
        }
    }

    @Test(arguments: Backend.all)
    func missingZoneIsRequestLevelZoneNotFound(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let answer = try await client.call(
                .private, .recordsModify,
                RecordsModifyRequest(zoneID: ZoneID(zoneName: "Nowhere"), operations: [.init(.create, note("A"))]))
            #expect(answer.status == 404)
            #expect(answer.error?.serverErrorCode == .zoneNotFound)
            #expect(answer.error?.zoneID?.zoneName == "Nowhere")
        }
    }

    @Test(arguments: Backend.all)
    func defaultZoneAlwaysExists(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            let saved = try await client.save("_defaultZone", [note("D-1")])
            #expect(saved[0].zoneID?.zoneName == "_defaultZone")
            let publicSave = try await client.modify("_defaultZone", [.init(.create, note("P-1"))], in: .public)
            #expect(publicSave.results.first?.value?.zoneID?.ownerRecordName == "_defaultOwner")
        }
    }

    @Test(arguments: Backend.all)
    func references_validateNeedsTargetAndDeleteSelfCascades(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let toMissing = note("N-1", extra: ["folder": .reference(Reference(recordName: "F-missing", action: .validate))])
            let (_, failed) = try await client.modify([.init(.create, toMissing)], atomic: false)
            #expect(failed.first?.code == .validatingReferenceError)

            let folder = Record(recordName: "F-1", recordType: "Folder", fields: ["title": "Inbox"])
            let child = note("N-1", extra: ["folder": .reference(Reference(recordName: "F-1", action: .validate))])
            let (status, saved) = try await client.modify([.init(.create, child), .init(.create, folder)])
            #expect(status == 200, "a target saved in the same request satisfies VALIDATE")
            #expect(saved.allSatisfy { $0.value != nil })

            let owned = note("N-2", extra: ["folder": .reference(Reference(recordName: "F-1", action: .deleteSelf))])
            let grandchild = note("N-3", extra: ["parent": .reference(Reference(recordName: "N-2", action: .deleteSelf))])
            try await client.save([owned, grandchild])
            let before = try await client.allZoneChanges()
            _ = try await client.modify([.init(.forceDelete, Record(recordName: "F-1"))])
            let looked = try await client.lookup(["N-1", "N-2", "N-3"])
            #expect(looked.map(\.code) == [nil, .notFound, .notFound], "DELETE_SELF deletes referrers transitively")
            let after = try await client.allZoneChanges(token: before.token)
            #expect(Set(after.records.filter(\.deleted).map(\.recordName)) == ["F-1", "N-2", "N-3"])
        }
    }

    /// A reference a record no longer holds cascades no more: after a replace that drops it, and
    /// after a delete and a create of the same name without it (the create's batch skips removing
    /// references on PostgreSQL, since a deleted record has none left).
    @Test(arguments: Backend.all)
    func references_droppedByAnUpdateOrADeleteNoLongerCascade(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            let folders = [Record(recordName: "F-1", recordType: "Folder"), Record(recordName: "F-2", recordType: "Folder")]
            let updated = note("N-1", extra: ["folder": .reference(Reference(recordName: "F-1", action: .deleteSelf))])
            let recreated = note("N-2", extra: ["folder": .reference(Reference(recordName: "F-2", action: .deleteSelf))])
            let saved = try await client.save(folders + [updated, recreated])
            var dropped = try #require(saved.first { $0.recordName == "N-1" })
            dropped.fields["folder"] = nil
            _ = try await client.save([dropped], .forceReplace)
            _ = try await client.modify([.init(.forceDelete, Record(recordName: "N-2"))])
            _ = try await client.save([note("N-2")])
            _ = try await client.modify([.init(.forceDelete, Record(recordName: "F-1")), .init(.forceDelete, Record(recordName: "F-2"))])
            let looked = try await client.lookup(["N-1", "N-2"])
            #expect(looked.map(\.code) == [nil, nil], "neither note refers to a folder any more")
        }
    }

    @Test(arguments: Backend.all)
    func typeChangeOfExistingRecordIsBadRequest(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            try await client.save([note("N-1")])
            let (_, results) = try await client.modify(
                [.init(.forceReplace, Record(recordName: "N-1", recordType: "Folder", fields: [:]))], atomic: false)
            #expect(results.first?.code == .badRequest)
        }
    }

    /// A records/modify that carries the zone's token answers the token after its writes only
    /// when nothing but it changed the zone since: then a fetch from that token has nothing new.
    @Test(arguments: Backend.all)
    func syncToken_answeredOnlyWhenTheRequestIsAllThatChangedTheZone(_ backend: Backend) async throws {
        try await withServer(backend) { _, client in
            try await client.createZone("Notes")
            func modify(_ operations: [RecordsModifyRequest.Operation], token: String?, desiredKeys: [String]? = nil)
                async throws -> (status: Int, response: RecordsResponse?, answer: Answer)
            {
                let answer = try await client.call(
                    .private, .recordsModify,
                    RecordsModifyRequest(zoneID: ZoneID(zoneName: "Notes"), operations: operations, desiredKeys: desiredKeys, syncToken: token))
                return (answer.status, answer.status == 200 ? try answer.decode(RecordsResponse.self) : nil, answer)
            }

            // Without a token the client knows nothing: only a zone never written answers one.
            let fresh = try await modify([.init(.create, note("N-0"))], token: nil)
            let afterFresh = try #require(fresh.response?.syncToken, "a zone never written: \(fresh.answer.text)")
            #expect(try await client.allZoneChanges(token: afterFresh).records.isEmpty)
            try await client.save([note("N-1")])
            let start = try await client.allZoneChanges().token

            let first = try await modify([.init(.create, note("N-2")), .init(.forceUpdate, note("N-1", title: "edited"))], token: start)
            let after = try #require(first.response?.syncToken, "nothing else changed the zone: \(first.answer.text)")
            let echo = try await client.allZoneChanges(token: after)
            #expect(echo.records.isEmpty, "the answer brought the client up to its token")
            let fromStart = try await client.allZoneChanges(token: start)
            #expect(Set(fromStart.records.map(\.recordName)) == ["N-1", "N-2"], "the writes are after the token it carried")

            // Chained: the next request carries the token the last answer gave.
            let second = try await modify([.init(.forceDelete, Record(recordName: "N-2"))], token: after)
            let afterDelete = try #require(second.response?.syncToken)
            #expect(try await client.allZoneChanges(token: afterDelete).records.isEmpty)

            // Another device wrote after the token: no token, as the answer does not carry that write.
            try await client.asUser("alice-token", device: "device-B").save([note("N-3")])
            let stale = try await modify([.init(.create, note("N-4"))], token: afterDelete)
            #expect(stale.status == 200)
            #expect(stale.response?.syncToken == nil)
            #expect(try await modify([.init(.create, note("N-5"))], token: nil).response?.syncToken == nil, "no token, a zone written before: none")

            // A partial record in the answer does not bring the client up to date.
            let current = try await client.allZoneChanges().token
            let partial = try await modify([.init(.forceUpdate, note("N-1", title: "again"))], token: current, desiredKeys: ["title"])
            #expect(partial.status == 200)
            #expect(partial.response?.syncToken == nil)

            // A cascaded delete is a write the answer does not carry.
            try await client.save([
                Record(recordName: "F-1", recordType: "Folder", fields: ["title": "Inbox"]),
                note("N-6", extra: ["folder": .reference(Reference(recordName: "F-1", action: .deleteSelf))]),
            ])
            let beforeCascade = try await client.allZoneChanges().token
            let cascade = try await modify([.init(.forceDelete, Record(recordName: "F-1"))], token: beforeCascade)
            #expect(cascade.status == 200)
            #expect(cascade.response?.syncToken == nil)

            // A token that is not this zone's is refused, naming the problem.
            try await client.createZone("Other")
            let other = try await client.allZoneChanges("Other").token
            let foreign = try await modify([.init(.create, note("N-7"))], token: other)
            #expect(foreign.status == 400)
            #expect(foreign.answer.error?.reason?.contains("belongs to another zone") == true)
            let garbage = try await modify([.init(.create, note("N-7"))], token: "garbage!!")
            #expect(garbage.status == 400)
            #expect(garbage.answer.error?.code == .badRequest)
            #expect(try await client.lookup(["N-7"]).first?.code == .notFound, "a refused request wrote nothing")
        }
    }
}
