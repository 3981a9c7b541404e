import CloudStoreSync
import CloudStoreWire

/// Everything a zone holds on the server, read from its change feed from the start: what devices
/// must hold once they have converged.
///
/// ```swift
/// let server = HTTPCloudDatabase(baseURL: testServer.baseURL, container: "iCloud.test", token: "alice-token", deviceID: "check")
/// let truth = try await server.zoneContents(ZoneID(zoneName: "Notes"))
/// #expect(truth.duplicates == 0)
/// #expect(Set(await app.noteIDs()) == Set(truth.records.keys))   // your app's view
/// ```
public struct ZoneContents: Sendable, Hashable {
    /// The live records, by record name.
    public var records: [String: Record]
    /// Names the feed reported deleted.
    public var deletedNames: Set<String>
    /// How many times the feed named a record that it had already named; the protocol says a
    /// record appears once, in its latest state.
    public var duplicates: Int

    public init(records: [String: Record] = [:], deletedNames: Set<String> = [], duplicates: Int = 0) {
        self.records = records
        self.deletedNames = deletedNames
        self.duplicates = duplicates
    }

    /// The value of one field of every live record that has it, by record name.
    public func values(of field: String) -> [String: FieldValue] {
        records.compactMapValues { $0.fields[field] }
    }
}

extension CloudDatabase {
    /// Reads a zone's whole change feed, page by page, from the start (no token).
    public func zoneContents(_ zoneID: ZoneID) async throws -> ZoneContents {
        var contents = ZoneContents()
        var seen = Set<String>()
        var token: String?
        while true {
            let response = try await fetchZoneChanges(ZoneChangesRequest(zones: [.init(zoneID: zoneID, syncToken: token)]))
            switch response.zones.first {
            case .value(let page)?:
                for record in page.records {
                    if !seen.insert(record.recordName).inserted { contents.duplicates += 1 }
                    if record.deleted {
                        contents.deletedNames.insert(record.recordName)
                        contents.records[record.recordName] = nil
                    } else {
                        contents.records[record.recordName] = record
                    }
                }
                guard page.moreComing else { return contents }
                token = page.syncToken
            case .error(let error)?:
                throw CloudError.server(error, httpStatus: error.serverErrorCode.httpStatus)
            case nil:
                return contents
            }
        }
    }
}
