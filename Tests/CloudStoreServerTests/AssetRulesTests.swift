import CloudStoreWire
import Foundation
import Testing

@testable import CloudStoreServer

/// The asset decisions of records/modify, lifetime and ranges, driven directly without HTTP or storage.
@Suite("AssetRules")
struct AssetRulesTests {
    let zone = DatabasePartition(container: "c", environment: .development, scope: .private, owner: "_u1").zone("Notes")
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let assetID = "0123456789abcdef0123456789abcdef"
    /// A receipt as the server issues them (32 lowercase hex digits).
    static let r1 = "fedcba9876543210fedcba9876543210"

    var rules: AssetRules { AssetRules(zone: zone, caller: "_u1", now: now) }

    func receipt(
        caller: String = "_u1", zone: ZoneAddress? = nil, record: String = "N-1", field: String = "photo",
        expiresIn: TimeInterval = 60, consumed: Bool = false
    ) -> AssetReceipt {
        AssetReceipt(
            receipt: Self.r1, assetID: assetID, zone: zone ?? self.zone, recordName: record, fieldName: field, caller: caller,
            fileChecksum: "c1", size: 10, expiresAt: now.addingTimeInterval(expiresIn), isConsumed: consumed)
    }

    func resolve(_ asset: Asset, stored: FieldValue? = nil, receipt: AssetReceipt? = nil) -> Result<Asset, AssetProblem> {
        rules.resolve(
            asset, field: "photo", recordName: "N-1", stored: stored, receipts: receipt.map { [$0.receipt: $0] } ?? [:])
    }

    @Test func receipt_boundToThisCallerZoneRecordAndFieldIsStoredAsDownloadURLWithoutReceipt() throws {
        let sent = Asset(fileChecksum: "c1", size: 10, receipt: Self.r1)
        let stored = try resolve(sent, receipt: receipt()).get()
        #expect(stored == Asset(fileChecksum: "c1", size: 10, downloadURL: "/database/1/c/development/private/assets/download/\(assetID)"))
        #expect(AssetRules.assetIDs(in: ["photo": .asset(stored)]) == [assetID])
    }

    @Test func receipt_refusedWhenUnknownForeignMisboundExpiredOrMismatched() {
        let sent = Asset(fileChecksum: "c1", size: 10, receipt: Self.r1)
        let other = DatabasePartition(container: "c", environment: .development, scope: .private, owner: "_u1").zone("Other")
        let cases: [(AssetReceipt?, String)] = [
            (nil, "unknown"),
            (receipt(caller: "_u2"), "another user"),
            (receipt(zone: other), "zone Other"),
            (receipt(record: "N-2"), "record N-2"),
            (receipt(field: "thumbnail"), "field thumbnail"),
            (receipt(expiresIn: -1), "expired"),
        ]
        for (receipt, expected) in cases {
            guard case .failure(let problem) = resolve(sent, receipt: receipt) else {
                Issue.record("accepted a receipt that is \(expected)")
                continue
            }
            #expect(problem.reason.contains("field photo") && problem.reason.contains(expected), "\(problem.reason)")
        }
        guard case .failure(let problem) = resolve(Asset(fileChecksum: "c2", size: 10, receipt: Self.r1), receipt: receipt())
        else { Issue.record("accepted another checksum"); return }
        #expect(problem.reason.contains("not those of the uploaded bytes"))
    }

    @Test func receipt_consumedBySameCallerAndFieldIsAcceptedAfterExpiry() throws {
        let sent = Asset(fileChecksum: "c1", size: 10, receipt: Self.r1)
        #expect(throws: Never.self) { try resolve(sent, receipt: receipt(expiresIn: -3600, consumed: true)).get() }
    }

    @Test func unchangedAsset_acceptedOnlyWhenTheStoredFieldHoldsIt() throws {
        let storedAsset = Asset(fileChecksum: "c1", size: 10, downloadURL: "/database/1/c/development/private/assets/download/\(assetID)")
        let back = try resolve(Asset(fileChecksum: "c1", size: 10, downloadURL: "/elsewhere"), stored: .asset(storedAsset)).get()
        #expect(back == storedAsset, "the stored downloadURL, never the client's")
        let inList = try resolve(Asset(fileChecksum: "c1", size: 10), stored: .list([.asset(storedAsset)])).get()
        #expect(inList == storedAsset)
        for (asset, stored) in [
            (Asset(fileChecksum: "made-up", size: 10), FieldValue.asset(storedAsset)),
            (Asset(fileChecksum: "c1", size: 11), .asset(storedAsset)),
            (Asset(fileChecksum: "c1", size: 10), nil),
        ] {
            guard case .failure(let problem) = resolve(asset, stored: stored) else {
                Issue.record("accepted \(asset) against \(String(describing: stored))")
                continue
            }
            #expect(problem.reason.contains("send a receipt: upload the bytes first"))
        }
    }

    @Test func list_resolvesEveryElementAndFailsOnAnyBadOne() throws {
        let good = Asset(fileChecksum: "c1", size: 10, receipt: Self.r1)
        let receipts = [Self.r1: receipt()]
        let fields: [String: FieldValue] = ["photo": .list([.asset(good)]), "title": "x"]
        let resolved = try rules.resolve(fields, recordName: "N-1", stored: nil, receipts: receipts).get()
        #expect(AssetRules.assetIDs(in: resolved) == [assetID])
        #expect(resolved["title"] == "x")
        let bad: [String: FieldValue] = ["photo": .list([.asset(good), .asset(Asset(fileChecksum: "x", size: 1))])]
        #expect(throws: (any Error).self) { try rules.resolve(bad, recordName: "N-1", stored: nil, receipts: receipts).get() }
        #expect(AssetRules.receipts(in: fields) == [Self.r1])
    }

    /// Found by the server fuzzer on PostgreSQL, which refuses NUL in text: a receipt the server
    /// could not have issued is never looked up in storage; it is unknown, a per-record BAD_REQUEST.
    @Test func aReceiptTheServerCouldNotHaveIssued_isNotLookedUpAndIsUnknown() {
        let fields: [String: FieldValue] = ["photo": .asset(Asset(fileChecksum: "c1", size: 10, receipt: "\u{0}😀9/bbZ"))]
        #expect(AssetRules.receipts(in: fields).isEmpty)
        guard case .failure(let problem) = resolve(Asset(fileChecksum: "c1", size: 10, receipt: "\u{0}😀9/bbZ")) else {
            Issue.record("a malformed receipt was accepted")
            return
        }
        #expect("\(problem)".contains("receipt is unknown"))
    }

    @Test func modifier_storesTheResolvedAssetAndRefusesABadReceiptPerRecord() throws {
        let recordRules = RecordRules(zone: zone, maxRecordBytes: 1 << 20)
        let records = [
            Record(recordName: "N-1", recordType: "Note", fields: ["photo": .asset(Asset(fileChecksum: "c1", size: 10, receipt: Self.r1))]),
            Record(recordName: "N-2", recordType: "Note", fields: ["photo": .asset(Asset(fileChecksum: "c1", size: 10, receipt: Self.r1))]),
        ]
        let modifier = RecordsModifier(
            operations: records.map { .init(type: .create, record: $0, failure: recordRules.check($0)) }, atomic: false,
            stamp: Record.Stamp(timestamp: now, userRecordName: "_u1"), environment: .development,
            onlyCreatorMayChange: false, rules: recordRules, present: { Record(recordName: $0.name) })
        #expect(modifier.snapshotRequest.receipts == [Self.r1])
        let (plan, outcomes) = try modifier.plan(
            RecordSnapshot(
                zone: .pristineDefaultZone(), records: [:], deleteSelfReferrers: [:], schema: .empty,
                receipts: [Self.r1: receipt()]))
        let write = try #require(plan.writes.first)
        #expect(plan.writes.count == 1 && write.name == "N-1")
        #expect(write.assetIDs == [assetID])
        guard case .save(let content, _, _) = write.change else { Issue.record("not a save"); return }
        #expect(!content.json.contains("receipt") && content.json.contains("downloadURL"))
        guard case .failed(let error) = outcomes[1] else { Issue.record("N-2 was saved with N-1's receipt"); return }
        #expect(error.serverErrorCode == .badRequest && error.reason?.contains("record N-1") == true)
    }

    @Test func lifetime_removableOnlyWhenNothingLiveNeedsTheBytes() {
        let lifetime = AssetLifetime(tombstoneHorizon: 30 * 24 * 3600)
        #expect(lifetime.removableAt(after: .saved) == nil, "a live record's asset is never removed")
        #expect(lifetime.removableAt(after: .uploaded(receiptExpiresAt: now)) == now, "never saved: once the receipt expired")
        #expect(lifetime.removableAt(after: .replaced(at: now)) == now, "replaced: at once")
        #expect(lifetime.removableAt(after: .recordDeleted(at: now)) == now.addingTimeInterval(30 * 24 * 3600))
        #expect(lifetime.removableAt(after: .receiving(urlExpiresAt: now))! > now, "an upload in progress outlives its URL")
    }

    @Test func access_privateAssetsForTheOwnerPublicForAnyone() {
        let privateZone = zone.partition
        var publicZone = privateZone
        (publicZone.scope, publicZone.owner) = (.public, DatabasePartition.publicOwner)
        #expect(AssetAccess.mayDownload(.user("_u1"), from: privateZone))
        #expect(!AssetAccess.mayDownload(.user("_u2"), from: privateZone))
        #expect(!AssetAccess.mayDownload(.serverKey("k"), from: privateZone))
        #expect(AssetAccess.mayDownload(.user("_u2"), from: publicZone))
        #expect(AssetAccess.mayDownload(.serverKey("k"), from: publicZone))
    }

    @Test func byteRange_singleRangesSuffixesAndOpenEnds() {
        #expect(ByteRangeRequest(header: nil, size: 100) == .whole)
        #expect(ByteRangeRequest(header: "bytes=0-9", size: 100) == .part(0..<10))
        #expect(ByteRangeRequest(header: "bytes=90-200", size: 100) == .part(90..<100))
        #expect(ByteRangeRequest(header: "bytes=95-", size: 100) == .part(95..<100))
        #expect(ByteRangeRequest(header: "bytes=-10", size: 100) == .part(90..<100))
        #expect(ByteRangeRequest(header: "bytes=-500", size: 100) == .part(0..<100))
        #expect(ByteRangeRequest(header: "bytes=100-", size: 100) == .unsatisfiable)
        #expect(ByteRangeRequest(header: "bytes=-0", size: 100) == .unsatisfiable)
        #expect(ByteRangeRequest(header: "bytes=0-1,5-6", size: 100) == .whole, "several ranges: the whole asset")
        #expect(ByteRangeRequest(header: "items=0-1", size: 100) == .whole)
        #expect(ByteRangeRequest(header: "bytes=9-3", size: 100) == .whole)
    }

    @Test func identifiers_areRandom128BitHex() {
        let first = AssetLocation.newIdentifier()
        #expect(AssetLocation.isIdentifier(first))
        #expect(first != AssetLocation.newIdentifier())
        #expect(AssetLocation.assetID(inDownloadURL: "http://h/database/1/c/development/private/assets/download/\(first)") == first)
        #expect(AssetLocation.assetID(inDownloadURL: "/x/assets/download/../../etc") == nil)
    }
}
