/// The App Store's own reports, as opposed to the device's payment queue: one event per signed
/// object Apple sends (a transaction, a subscription's renewal info), carrying Apple's *current*
/// view of it as signed at the event's `at`.
///
/// Apple sends these late, twice and in any order, and a later one replaces an earlier one
/// (a refund adds a revocation date, a reversal takes it away, an extension moves the expiry).
/// So the ledger keeps, per account and per transaction (or original transaction), the one
/// signed last: which one that is depends on the events, not on the order they arrived in.

/// What Apple says about one transaction (`JWSTransactionDecodedPayload`).
public struct StoreTransaction: Sendable, Hashable {
    /// Apple's `transactionId`.
    public var transaction: String
    public var originalTransaction: String?
    /// A product id of the catalog.
    public var product: String
    /// 1…10; nil means 1.
    public var quantity: Int?
    public var purchasedAt: Timestamp?
    /// Subscriptions: when the period paid for ends (an extension moves it).
    public var expiresAt: Timestamp?
    /// Apple's `subscriptionGroupIdentifier`.
    public var subscriptionGroup: String?
    public var ownership: StoreOwnership?
    public var environment: StoreEnvironment?
    /// In milliunits of `currency`, as Apple reports it (a $0.99 purchase is 990).
    public var price: Int64?
    /// ISO 4217 code.
    public var currency: String?
    /// Apple's three-letter storefront code.
    public var storefront: String?
    /// Present while Apple holds the transaction refunded or revoked; a later report without it
    /// (a reversed refund) restores the transaction.
    public var revokedAt: Timestamp?
    /// Apple's `revocationReason`: 0 for another reason, 1 for an issue in the app.
    public var revocationReason: Int?
    public var revocationType: StoreRevocationType?
    /// Apple's `revocationPercentage`: the share refunded, in thousandths of a percent (0…100000).
    public var revocationPercentage: Int?
    /// Apple's `isUpgraded`: the user moved to a higher level of the group; this transaction no
    /// longer grants anything.
    public var upgraded: Bool?
    /// Where the report came from (for example `notification DID_RENEW`), for people auditing.
    public var source: String?
    /// Apple's JWS the report was read from (`signedTransactionInfo`), kept as proof: `ledger
    /// verify --root` checks its signature and that it says what the event says. Kept in the
    /// log only, not in projections or snapshots.
    public var signed: String?

    // What else Apple signs about the sale (API 1.15–1.21), kept for the business and shown in
    // the account's store view; none of it changes what the customer is granted. Apple's
    // enumerations among them are kept as Apple spells them, including values added later.

    /// `originalPurchaseDate`: when the original transaction was bought.
    public var originalPurchasedAt: Timestamp? = nil
    /// `webOrderLineItemId`: one per period of a subscription, across devices.
    public var webOrderLineItem: String? = nil
    /// `storefrontId`: Apple's numeric storefront.
    public var storefrontId: String? = nil
    /// `transactionReason`: `PURCHASE` or `RENEWAL`.
    public var transactionReason: String? = nil
    /// `offerType`: 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    public var offerType: Int? = nil
    public var offerIdentifier: String? = nil
    /// `offerDiscountType`: `FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT`, `ONE_TIME`.
    public var offerDiscountType: String? = nil
    /// `offerPeriod`: an ISO 8601 duration such as `P1M`.
    public var offerPeriod: String? = nil
    /// `appTransactionId`: one per customer and app (API 1.15).
    public var appTransaction: String? = nil
    /// `appAccountToken`, as Apple sent it.
    public var appAccountToken: String? = nil
    /// `billingPlanType`: `BILLED_UPFRONT` or `MONTHLY` (a plan paid monthly over a commitment).
    public var billingPlanType: String? = nil
    /// `commitmentInfo`: the period of the commitment this transaction pays (1-based), of how
    /// many, when the commitment ends and its total price (milliunits of `currency`).
    public var commitmentBillingPeriod: Int? = nil
    public var commitmentBillingPeriods: Int? = nil
    public var commitmentExpiresAt: Timestamp? = nil
    public var commitmentPrice: Int64? = nil

    public init(
        transaction: String, originalTransaction: String? = nil, product: String, quantity: Int? = nil,
        purchasedAt: Timestamp? = nil, expiresAt: Timestamp? = nil, subscriptionGroup: String? = nil,
        ownership: StoreOwnership? = nil, environment: StoreEnvironment? = nil, price: Int64? = nil,
        currency: String? = nil, storefront: String? = nil, revokedAt: Timestamp? = nil,
        revocationReason: Int? = nil, revocationType: StoreRevocationType? = nil,
        revocationPercentage: Int? = nil, upgraded: Bool? = nil, source: String? = nil, signed: String? = nil
    ) {
        self.transaction = transaction
        self.originalTransaction = originalTransaction
        self.product = product
        self.quantity = quantity
        self.purchasedAt = purchasedAt
        self.expiresAt = expiresAt
        self.subscriptionGroup = subscriptionGroup
        self.ownership = ownership
        self.environment = environment
        self.price = price
        self.currency = currency
        self.storefront = storefront
        self.revokedAt = revokedAt
        self.revocationReason = revocationReason
        self.revocationType = revocationType
        self.revocationPercentage = revocationPercentage
        self.upgraded = upgraded
        self.source = source
        self.signed = signed
    }
}

/// What Apple says about a subscription's next renewal (`JWSRenewalInfoDecodedPayload`).
public struct RenewalInfo: Sendable, Hashable {
    /// The subscription's `originalTransactionId`: what the renewal info is about.
    public var originalTransaction: String
    /// The product the subscription is in now (`productId`).
    public var product: String?
    /// `autoRenewProductId`: the product the next period renews to.
    public var renewsTo: String?
    /// `autoRenewStatus`: 1 is true.
    public var willRenew: Bool?
    /// `isInBillingRetryPeriod`.
    public var billingRetry: Bool?
    /// `gracePeriodExpiresDate`: access continues until then while Apple retries billing.
    public var gracePeriodEndsAt: Timestamp?
    /// `expirationIntent`: 1 cancelled, 2 billing error, 3 declined a price increase, 4 product
    /// not for sale, 5 other.
    public var expirationIntent: Int?
    public var environment: StoreEnvironment?
    public var source: String?
    /// Apple's JWS (`signedRenewalInfo`), kept as proof, as `StoreTransaction.signed`.
    public var signed: String?

    // What else Apple signs about the next renewal, kept as `StoreTransaction`'s extra fields.

    /// `renewalPrice`, in milliunits of `currency`.
    public var renewalPrice: Int64? = nil
    public var currency: String? = nil
    /// `renewalDate`: when the next period starts.
    public var renewsAt: Timestamp? = nil
    /// `recentSubscriptionStartDate`: the start of the latest run of paid periods without a gap
    /// of more than 60 days.
    public var recentSubscriptionStartedAt: Timestamp? = nil
    /// `priceIncreaseStatus`: 0 the customer has not answered, 1 consented (or needed not).
    public var priceIncreaseStatus: Int? = nil
    /// The offer the next period renews with.
    public var offerType: Int? = nil
    public var offerIdentifier: String? = nil
    public var offerDiscountType: String? = nil
    public var offerPeriod: String? = nil
    /// `eligibleWinBackOfferIds`.
    public var eligibleWinBackOffers: [String]? = nil
    public var appTransaction: String? = nil
    public var appAccountToken: String? = nil
    /// `renewalBillingPlanType`.
    public var billingPlanType: String? = nil
    /// `commitmentInfo`: what the commitment renews to, whether it will, on which plan, when
    /// and for how much.
    public var commitmentRenewsTo: String? = nil
    public var commitmentWillRenew: Bool? = nil
    public var commitmentBillingPlanType: String? = nil
    public var commitmentRenewsAt: Timestamp? = nil
    public var commitmentRenewalPrice: Int64? = nil

    public init(
        originalTransaction: String, product: String? = nil, renewsTo: String? = nil, willRenew: Bool? = nil,
        billingRetry: Bool? = nil, gracePeriodEndsAt: Timestamp? = nil, expirationIntent: Int? = nil,
        environment: StoreEnvironment? = nil, source: String? = nil, signed: String? = nil
    ) {
        self.originalTransaction = originalTransaction
        self.product = product
        self.renewsTo = renewsTo
        self.willRenew = willRenew
        self.billingRetry = billingRetry
        self.gracePeriodEndsAt = gracePeriodEndsAt
        self.expirationIntent = expirationIntent
        self.environment = environment
        self.source = source
        self.signed = signed
    }
}

/// Apple's `inAppOwnershipType`, spelled as Apple spells it.
public enum StoreOwnership: String, Sendable, Hashable, CaseIterable {
    case purchased = "PURCHASED"
    case familyShared = "FAMILY_SHARED"
}

/// Apple's `environment`, spelled as Apple spells it.
public enum StoreEnvironment: String, Codable, Sendable, Hashable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
    case xcode = "Xcode"
    case localTesting = "LocalTesting"
}

extension StoreEnvironment {
    /// The environments left out when only those named in `kept` (as Apple spells them) count;
    /// none when `kept` is empty. For `--environment` and `?environment=`.
    public static func excluded(keeping kept: some Sequence<String>) throws(UnknownStoreEnvironment) -> Set<StoreEnvironment> {
        let keeping = try named(kept)
        return keeping.isEmpty ? [] : Set(allCases).subtracting(keeping)
    }

    /// The environments `names` names (as Apple spells them); empty for no names.
    public static func named(_ names: some Sequence<String>) throws(UnknownStoreEnvironment) -> Set<StoreEnvironment> {
        var named: Set<StoreEnvironment> = []
        for name in names {
            guard let environment = StoreEnvironment(rawValue: name) else { throw UnknownStoreEnvironment(name: name) }
            named.insert(environment)
        }
        return named
    }
}

/// A name that is none of Apple's environments.
public struct UnknownStoreEnvironment: Error, CustomStringConvertible {
    public var name: String
    public var description: String {
        "environment must be one of \(StoreEnvironment.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(name)\""
    }
}

/// Apple's `revocationType`, spelled as Apple spells it.
public enum StoreRevocationType: String, Sendable, Hashable, CaseIterable {
    case refundFull = "REFUND_FULL"
    case refundProrated = "REFUND_PRORATED"
    case familyRevoke = "FAMILY_REVOKE"
}

extension Event {
    public static func storeTransaction(id: String, account: String, signedAt: Timestamp, _ fact: StoreTransaction) -> Event {
        Event(id: id, account: account, at: signedAt, payload: .storeTransaction(fact))
    }

    public static func renewalInfo(id: String, account: String, signedAt: Timestamp, _ info: RenewalInfo) -> Event {
        Event(id: id, account: account, at: signedAt, payload: .renewalInfo(info))
    }
}

extension StoreTransaction {
    /// The report without Apple's fields of API 1.15–1.21 (`originalPurchasedAt` on): what an
    /// event written before the ledger kept them carries.
    public var withoutSaleDetails: StoreTransaction {
        var fact = self
        (fact.originalPurchasedAt, fact.webOrderLineItem, fact.storefrontId, fact.transactionReason) = (nil, nil, nil, nil)
        (fact.offerType, fact.offerIdentifier, fact.offerDiscountType, fact.offerPeriod) = (nil, nil, nil, nil)
        (fact.appTransaction, fact.appAccountToken, fact.billingPlanType) = (nil, nil, nil)
        (fact.commitmentBillingPeriod, fact.commitmentBillingPeriods, fact.commitmentExpiresAt, fact.commitmentPrice) = (nil, nil, nil, nil)
        return fact
    }
}

extension RenewalInfo {
    /// The renewal info without Apple's fields of API 1.15–1.21 (`renewalPrice` on).
    public var withoutRenewalDetails: RenewalInfo {
        var info = self
        (info.renewalPrice, info.currency, info.renewsAt, info.recentSubscriptionStartedAt) = (nil, nil, nil, nil)
        (info.priceIncreaseStatus, info.offerType, info.offerIdentifier, info.offerDiscountType, info.offerPeriod) = (nil, nil, nil, nil, nil)
        (info.eligibleWinBackOffers, info.appTransaction, info.appAccountToken, info.billingPlanType) = (nil, nil, nil, nil)
        (info.commitmentRenewsTo, info.commitmentWillRenew, info.commitmentBillingPlanType) = (nil, nil, nil)
        (info.commitmentRenewsAt, info.commitmentRenewalPrice) = (nil, nil)
        return info
    }
}

extension Event {
    /// The customer's `appTransactionId` a store report names, if any: the first report naming
    /// it makes its account the customer's (`Ledger.account(ofAppTransaction:)`).
    var appTransaction: String? {
        switch payload {
        case .storeTransaction(let fact): fact.appTransaction.flatMap { $0.isEmpty ? nil : $0 }
        case .renewalInfo(let info): info.appTransaction.flatMap { $0.isEmpty ? nil : $0 }
        default: nil
        }
    }
}

extension StoreTransaction {
    /// The subscription or purchase it belongs to: its original transaction, else itself.
    var chain: String { originalTransaction ?? transaction }
}
