import os
from datetime import datetime
from typing import List, Optional

from fastapi import FastAPI, Query, Path
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Boolean, Column, Float, ForeignKey, Integer, String, Text, create_engine, func
from sqlalchemy.orm import declarative_base, sessionmaker

DATABASE_PATH = os.environ.get("DATABASE_PATH", "sqlite:///online_store.db")
engine = create_engine(DATABASE_PATH, connect_args={"check_same_thread": False})
SessionLocal = sessionmaker(bind=engine, autocommit=False, autoflush=False)
Base = declarative_base()


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    username = Column(String, nullable=False, unique=True)
    email = Column(String, nullable=False, unique=True)
    full_name = Column(String, nullable=False)
    phone = Column(String)
    created_at = Column(String, nullable=False)


class Address(Base):
    __tablename__ = "addresses"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    label = Column(String, nullable=False)
    recipient_name = Column(String, nullable=False)
    street = Column(String, nullable=False)
    city = Column(String, nullable=False)
    state = Column(String, nullable=False)
    postal_code = Column(String, nullable=False)
    country = Column(String, nullable=False, default="United States")
    phone = Column(String)
    is_default = Column(Boolean, nullable=False, default=False)
    created_at = Column(String, nullable=False)


class Category(Base):
    __tablename__ = "categories"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False, unique=True)
    parent_id = Column(Integer, ForeignKey("categories.id"))
    description = Column(Text)


class Product(Base):
    __tablename__ = "products"
    id = Column(Integer, primary_key=True)
    category_id = Column(Integer, ForeignKey("categories.id"), nullable=False)
    name = Column(String, nullable=False)
    brand = Column(String, nullable=False)
    description = Column(Text)
    base_price = Column(Float, nullable=False)
    is_active = Column(Boolean, nullable=False, default=True)
    created_at = Column(String, nullable=False)


class ProductVariant(Base):
    __tablename__ = "product_variants"
    id = Column(Integer, primary_key=True)
    product_id = Column(Integer, ForeignKey("products.id"), nullable=False)
    sku = Column(String, nullable=False, unique=True)
    color = Column(String)
    size = Column(String)
    price = Column(Float, nullable=False)
    stock_quantity = Column(Integer, nullable=False, default=0)


class Coupon(Base):
    __tablename__ = "coupons"
    id = Column(Integer, primary_key=True)
    code = Column(String, nullable=False, unique=True)
    description = Column(Text)
    discount_type = Column(String, nullable=False)
    discount_value = Column(Float, nullable=False)
    min_order_total = Column(Float, nullable=False, default=0)
    valid_from = Column(String, nullable=False)
    valid_until = Column(String, nullable=False)
    is_active = Column(Boolean, nullable=False, default=True)


class Cart(Base):
    __tablename__ = "carts"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False, unique=True)
    created_at = Column(String, nullable=False)
    updated_at = Column(String, nullable=False)


class CartItem(Base):
    __tablename__ = "cart_items"
    id = Column(Integer, primary_key=True)
    cart_id = Column(Integer, ForeignKey("carts.id"), nullable=False)
    variant_id = Column(Integer, ForeignKey("product_variants.id"), nullable=False)
    quantity = Column(Integer, nullable=False)
    added_at = Column(String, nullable=False)


class Order(Base):
    __tablename__ = "orders"
    id = Column(Integer, primary_key=True)
    order_number = Column(String, nullable=False, unique=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    address_id = Column(Integer, ForeignKey("addresses.id"), nullable=False)
    coupon_id = Column(Integer, ForeignKey("coupons.id"))
    status = Column(String, nullable=False, default="pending")
    subtotal = Column(Float, nullable=False)
    discount_amount = Column(Float, nullable=False, default=0)
    shipping_fee = Column(Float, nullable=False, default=0)
    total = Column(Float, nullable=False)
    placed_at = Column(String, nullable=False)
    updated_at = Column(String, nullable=False)


class OrderItem(Base):
    __tablename__ = "order_items"
    id = Column(Integer, primary_key=True)
    order_id = Column(Integer, ForeignKey("orders.id"), nullable=False)
    variant_id = Column(Integer, ForeignKey("product_variants.id"), nullable=False)
    product_name = Column(String, nullable=False)
    quantity = Column(Integer, nullable=False)
    unit_price = Column(Float, nullable=False)


class Review(Base):
    __tablename__ = "reviews"
    id = Column(Integer, primary_key=True)
    product_id = Column(Integer, ForeignKey("products.id"), nullable=False)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    rating = Column(Integer, nullable=False)
    title = Column(String, nullable=False)
    body = Column(Text)
    created_at = Column(String, nullable=False)


class ReturnRequest(Base):
    __tablename__ = "returns"
    id = Column(Integer, primary_key=True)
    order_item_id = Column(Integer, ForeignKey("order_items.id"), nullable=False)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    quantity = Column(Integer, nullable=False)
    reason = Column(Text, nullable=False)
    status = Column(String, nullable=False, default="requested")
    refund_amount = Column(Float, nullable=False, default=0)
    requested_at = Column(String, nullable=False)


class WishlistItem(Base):
    __tablename__ = "wishlist_items"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    product_id = Column(Integer, ForeignKey("products.id"), nullable=False)
    added_at = Column(String, nullable=False)


Base.metadata.create_all(engine)

app = FastAPI(title="Pinecrest Online Store API", version="1.0.0")


def now_str():
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


class CategoryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Category ID", examples=[2])
    name: str = Field(..., description="Category name", examples=["Audio"])
    parent_id: Optional[int] = Field(None, description="Parent category ID, if any", examples=[1])
    description: Optional[str] = Field(None, description="Category description", examples=["Headphones, earbuds and speakers"])


class CategoryList(BaseModel):
    categories: List[CategoryOut] = Field(..., description="All catalog categories")


class ProductSummary(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Product ID", examples=[1])
    name: str = Field(..., description="Product name", examples=["Aurora Wireless Headphones"])
    brand: str = Field(..., description="Brand or publisher", examples=["Sonique"])
    category_id: int = Field(..., description="Category ID", examples=[2])
    category_name: str = Field(..., description="Category name", examples=["Audio"])
    base_price: float = Field(..., description="Starting price in USD", examples=[129.99])
    is_active: bool = Field(..., description="Whether the product is currently sold", examples=[True])
    total_stock: int = Field(..., description="Units in stock across all variants", examples=[20])


class ProductList(BaseModel):
    products: List[ProductSummary] = Field(..., description="Matching products")
    count: int = Field(..., description="Number of matching products", examples=[3])


class VariantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Variant ID", examples=[1])
    product_id: int = Field(..., description="Product ID", examples=[1])
    sku: str = Field(..., description="Stock keeping unit", examples=["AUR-HP-BLK"])
    color: Optional[str] = Field(None, description="Color", examples=["Black"])
    size: Optional[str] = Field(None, description="Size or capacity", examples=["M"])
    price: float = Field(..., description="Variant price in USD", examples=[129.99])
    stock_quantity: int = Field(..., description="Units in stock", examples=[14])


class ProductDetail(BaseModel):
    id: int = Field(..., description="Product ID", examples=[1])
    name: str = Field(..., description="Product name", examples=["Aurora Wireless Headphones"])
    brand: str = Field(..., description="Brand or publisher", examples=["Sonique"])
    description: Optional[str] = Field(None, description="Product description", examples=["Over-ear noise-cancelling headphones"])
    category_id: int = Field(..., description="Category ID", examples=[2])
    category_name: str = Field(..., description="Category name", examples=["Audio"])
    base_price: float = Field(..., description="Starting price in USD", examples=[129.99])
    is_active: bool = Field(..., description="Whether the product is currently sold", examples=[True])
    average_rating: Optional[float] = Field(None, description="Average review rating rounded to 2 decimals", examples=[4.33])
    review_count: int = Field(..., description="Number of reviews", examples=[3])
    variants: List[VariantOut] = Field(..., description="Purchasable variants")


class ReviewOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Review ID", examples=[1])
    product_id: int = Field(..., description="Product ID", examples=[1])
    user_id: int = Field(..., description="Author user ID", examples=[2])
    rating: int = Field(..., description="Star rating 1-5", examples=[5])
    title: str = Field(..., description="Review title", examples=["Great sound"])
    body: Optional[str] = Field(None, description="Review text", examples=["Noise cancelling is superb."])
    created_at: str = Field(..., description="Creation timestamp", examples=["2026-02-20 21:00:00"])


class ReviewList(BaseModel):
    product_id: int = Field(..., description="Product ID", examples=[1])
    product_name: str = Field(..., description="Product name", examples=["Aurora Wireless Headphones"])
    average_rating: Optional[float] = Field(None, description="Average rating rounded to 2 decimals", examples=[4.33])
    review_count: int = Field(..., description="Number of reviews", examples=[3])
    reviews: List[ReviewOut] = Field(..., description="Reviews, newest first")


class ReviewCreate(BaseModel):
    rating: int = Field(..., description="Star rating 1-5", examples=[5])
    title: str = Field(..., description="Review title", examples=["Perfect daypack"])
    body: Optional[str] = Field(None, description="Review text", examples=["Comfortable straps and plenty of pockets."])


class CartItemOut(BaseModel):
    id: int = Field(..., description="Cart item ID", examples=[1])
    variant_id: int = Field(..., description="Variant ID", examples=[17])
    product_id: int = Field(..., description="Product ID", examples=[9])
    product_name: str = Field(..., description="Product name", examples=["Merino Wool Socks 3-Pack"])
    sku: str = Field(..., description="Variant SKU", examples=["MER-SCK-GRY-L"])
    color: Optional[str] = Field(None, description="Variant color", examples=["Heather Grey"])
    size: Optional[str] = Field(None, description="Variant size", examples=["L"])
    unit_price: float = Field(..., description="Current unit price", examples=[24.0])
    quantity: int = Field(..., description="Quantity in cart", examples=[2])
    line_total: float = Field(..., description="unit_price x quantity", examples=[48.0])


class CartOut(BaseModel):
    cart_id: int = Field(..., description="Cart ID", examples=[1])
    items: List[CartItemOut] = Field(..., description="Items in the cart")
    item_count: int = Field(..., description="Total units in the cart", examples=[3])
    subtotal: float = Field(..., description="Sum of line totals", examples=[97.99])


class CartItemAdd(BaseModel):
    variant_id: int = Field(..., description="Variant ID to add", examples=[10])
    quantity: int = Field(1, description="Units to add", examples=[2])


class CartItemUpdate(BaseModel):
    quantity: int = Field(..., description="New quantity", examples=[3])


class CheckoutRequest(BaseModel):
    address_id: int = Field(..., description="Shipping address ID of the current user", examples=[2])
    coupon_code: Optional[str] = Field(None, description="Coupon code to apply", examples=["SPRING15"])


class OrderItemOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Order item ID", examples=[1])
    variant_id: int = Field(..., description="Variant ID", examples=[1])
    product_name: str = Field(..., description="Product name at time of purchase", examples=["Aurora Wireless Headphones"])
    quantity: int = Field(..., description="Units ordered", examples=[1])
    unit_price: float = Field(..., description="Unit price paid", examples=[129.99])


class OrderSummary(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Order ID", examples=[3])
    order_number: str = Field(..., description="Human-readable order number", examples=["PC-1003"])
    status: str = Field(..., description="pending, paid, shipped, delivered or cancelled", examples=["shipped"])
    address_id: int = Field(..., description="Shipping address ID", examples=[2])
    coupon_id: Optional[int] = Field(None, description="Applied coupon ID", examples=[2])
    subtotal: float = Field(..., description="Items subtotal", examples=[143.5])
    discount_amount: float = Field(..., description="Coupon discount", examples=[10.0])
    shipping_fee: float = Field(..., description="Shipping fee", examples=[0.0])
    total: float = Field(..., description="Amount charged", examples=[133.5])
    placed_at: str = Field(..., description="When the order was placed", examples=["2026-03-05 18:22:00"])
    updated_at: str = Field(..., description="Last status change", examples=["2026-03-07 09:00:00"])


class OrderList(BaseModel):
    orders: List[OrderSummary] = Field(..., description="Orders of the current user, newest first")


class OrderDetail(OrderSummary):
    coupon_code: Optional[str] = Field(None, description="Applied coupon code", examples=["SAVE10"])
    items: List[OrderItemOut] = Field(..., description="Order line items")


class CouponOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Coupon ID", examples=[1])
    code: str = Field(..., description="Coupon code", examples=["SPRING15"])
    description: Optional[str] = Field(None, description="Coupon description", examples=["15% off spring orders of $50 or more"])
    discount_type: str = Field(..., description="percent or fixed", examples=["percent"])
    discount_value: float = Field(..., description="Percent or dollar amount", examples=[15.0])
    min_order_total: float = Field(..., description="Minimum subtotal to qualify", examples=[50.0])
    valid_from: str = Field(..., description="First valid date", examples=["2026-03-01"])
    valid_until: str = Field(..., description="Last valid date", examples=["2026-04-30"])
    is_active: bool = Field(..., description="Whether the coupon is enabled", examples=[True])


class AddressOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int = Field(..., description="Address ID", examples=[1])
    label: str = Field(..., description="Address label", examples=["Home"])
    recipient_name: str = Field(..., description="Recipient", examples=["Maya Thompson"])
    street: str = Field(..., description="Street line", examples=["1420 NW Lovejoy St Apt 5"])
    city: str = Field(..., description="City", examples=["Portland"])
    state: str = Field(..., description="State", examples=["OR"])
    postal_code: str = Field(..., description="ZIP / postal code", examples=["97209"])
    country: str = Field(..., description="Country", examples=["United States"])
    phone: Optional[str] = Field(None, description="Contact phone", examples=["503-555-0142"])
    is_default: bool = Field(..., description="Default shipping address", examples=[True])
    created_at: str = Field(..., description="Creation timestamp", examples=["2025-06-02 14:25:00"])


class AddressList(BaseModel):
    addresses: List[AddressOut] = Field(..., description="Addresses of the current user")


class AddressCreate(BaseModel):
    label: str = Field(..., description="Address label", examples=["Cabin"])
    recipient_name: str = Field(..., description="Recipient", examples=["Maya Thompson"])
    street: str = Field(..., description="Street line", examples=["88 Pine Ridge Road"])
    city: str = Field(..., description="City", examples=["Bend"])
    state: str = Field(..., description="State", examples=["OR"])
    postal_code: str = Field(..., description="ZIP / postal code", examples=["97701"])
    country: str = Field("United States", description="Country", examples=["United States"])
    phone: Optional[str] = Field(None, description="Contact phone", examples=["503-555-0142"])
    is_default: bool = Field(False, description="Make this the default shipping address", examples=[True])


class AddressUpdate(BaseModel):
    label: Optional[str] = Field(None, description="Address label", examples=["Work"])
    recipient_name: Optional[str] = Field(None, description="Recipient", examples=["Maya Thompson"])
    street: Optional[str] = Field(None, description="Street line", examples=["600 SW Broadway Suite 310"])
    city: Optional[str] = Field(None, description="City", examples=["Portland"])
    state: Optional[str] = Field(None, description="State", examples=["OR"])
    postal_code: Optional[str] = Field(None, description="ZIP / postal code", examples=["97205"])
    country: Optional[str] = Field(None, description="Country", examples=["United States"])
    phone: Optional[str] = Field(None, description="Contact phone", examples=["503-555-0190"])
    is_default: Optional[bool] = Field(None, description="Make this the default shipping address", examples=[True])


class ReturnOut(BaseModel):
    id: int = Field(..., description="Return ID", examples=[1])
    order_item_id: int = Field(..., description="Returned order item ID", examples=[1])
    order_number: str = Field(..., description="Order number of the item", examples=["PC-1001"])
    product_name: str = Field(..., description="Product name", examples=["Aurora Wireless Headphones"])
    quantity: int = Field(..., description="Units returned", examples=[1])
    reason: str = Field(..., description="Return reason", examples=["Left ear cup crackles"])
    status: str = Field(..., description="requested, approved, rejected or refunded", examples=["requested"])
    refund_amount: float = Field(..., description="Refund amount", examples=[129.99])
    requested_at: str = Field(..., description="Request timestamp", examples=["2026-03-17 10:00:00"])


class ReturnList(BaseModel):
    returns: List[ReturnOut] = Field(..., description="Return requests of the current user")


class ReturnCreate(BaseModel):
    order_item_id: int = Field(..., description="Order item ID to return", examples=[1])
    quantity: int = Field(1, description="Units to return", examples=[1])
    reason: str = Field(..., description="Why the item is returned", examples=["Left ear cup crackles at high volume"])


class WishlistItemOut(BaseModel):
    id: int = Field(..., description="Wishlist item ID", examples=[1])
    product_id: int = Field(..., description="Product ID", examples=[5])
    product_name: str = Field(..., description="Product name", examples=["Summit Trail Backpack 45L"])
    base_price: float = Field(..., description="Starting price", examples=[99.5])
    added_at: str = Field(..., description="When it was added", examples=["2026-02-28 22:10:00"])


class WishlistOut(BaseModel):
    items: List[WishlistItemOut] = Field(..., description="Wishlist items of the current user")


class WishlistAdd(BaseModel):
    product_id: int = Field(..., description="Product ID to save", examples=[8])


class DeleteResult(BaseModel):
    id: int = Field(..., description="ID of the removed record", examples=[1])
    deleted: bool = Field(..., description="True when the record was removed", examples=[True])


def build_product_summary(session, product):
    category = session.query(Category).filter(Category.id == product.category_id).first()
    stock = session.query(func.coalesce(func.sum(ProductVariant.stock_quantity), 0)).filter(ProductVariant.product_id == product.id).scalar()
    return ProductSummary(id=product.id, name=product.name, brand=product.brand, category_id=product.category_id, category_name=category.name, base_price=product.base_price, is_active=product.is_active, total_stock=int(stock))


def rating_stats(session, product_id):
    avg, count = session.query(func.avg(Review.rating), func.count(Review.id)).filter(Review.product_id == product_id).one()
    return (round(float(avg), 2) if avg is not None else None), int(count)


def build_cart(session, cart):
    rows = session.query(CartItem).filter(CartItem.cart_id == cart.id).order_by(CartItem.id).all()
    items = []
    for row in rows:
        variant = session.query(ProductVariant).filter(ProductVariant.id == row.variant_id).first()
        product = session.query(Product).filter(Product.id == variant.product_id).first()
        items.append(CartItemOut(id=row.id, variant_id=variant.id, product_id=product.id, product_name=product.name, sku=variant.sku, color=variant.color, size=variant.size, unit_price=variant.price, quantity=row.quantity, line_total=round(variant.price * row.quantity, 2)))
    return CartOut(cart_id=cart.id, items=items, item_count=sum(i.quantity for i in items), subtotal=round(sum(i.line_total for i in items), 2))


def build_cart_item(session, row):
    variant = session.query(ProductVariant).filter(ProductVariant.id == row.variant_id).first()
    product = session.query(Product).filter(Product.id == variant.product_id).first()
    return CartItemOut(id=row.id, variant_id=variant.id, product_id=product.id, product_name=product.name, sku=variant.sku, color=variant.color, size=variant.size, unit_price=variant.price, quantity=row.quantity, line_total=round(variant.price * row.quantity, 2))


def get_or_create_cart(session, user_id):
    cart = session.query(Cart).filter(Cart.user_id == user_id).first()
    if cart is None:
        cart = Cart(user_id=user_id, created_at=now_str(), updated_at=now_str())
        session.add(cart)
        session.flush()
    return cart


def build_order_detail(session, order):
    items = session.query(OrderItem).filter(OrderItem.order_id == order.id).order_by(OrderItem.id).all()
    coupon = session.query(Coupon).filter(Coupon.id == order.coupon_id).first() if order.coupon_id else None
    data = OrderSummary.model_validate(order).model_dump()
    return OrderDetail(**data, coupon_code=coupon.code if coupon else None, items=[OrderItemOut.model_validate(i) for i in items])


def build_return(session, ret):
    item = session.query(OrderItem).filter(OrderItem.id == ret.order_item_id).first()
    order = session.query(Order).filter(Order.id == item.order_id).first()
    return ReturnOut(id=ret.id, order_item_id=ret.order_item_id, order_number=order.order_number, product_name=item.product_name, quantity=ret.quantity, reason=ret.reason, status=ret.status, refund_amount=ret.refund_amount, requested_at=ret.requested_at)


def build_wishlist_item(session, row):
    product = session.query(Product).filter(Product.id == row.product_id).first()
    return WishlistItemOut(id=row.id, product_id=product.id, product_name=product.name, base_price=product.base_price, added_at=row.added_at)


@app.get("/api/categories", summary="List categories", description="List all product categories with their parent category.", tags=["catalog"], operation_id="list_categories", response_model=CategoryList)
async def list_categories():
    session = SessionLocal()
    rows = session.query(Category).order_by(Category.id).all()
    result = CategoryList(categories=[CategoryOut.model_validate(r) for r in rows])
    session.close()
    return result


@app.get("/api/products", summary="Search products", description="Search the catalog by name, brand, category, price range and stock availability.", tags=["catalog"], operation_id="search_products", response_model=ProductList)
async def search_products(q: Optional[str] = Query(None, description="Text contained in the product name"), brand: Optional[str] = Query(None, description="Exact brand name"), category_id: Optional[int] = Query(None, description="Category ID"), min_price: Optional[float] = Query(None, description="Minimum base price"), max_price: Optional[float] = Query(None, description="Maximum base price"), in_stock: Optional[bool] = Query(None, description="Only products with at least one variant in stock"), include_inactive: bool = Query(False, description="Also return discontinued products")):
    session = SessionLocal()
    query = session.query(Product)
    if q:
        query = query.filter(Product.name.ilike(f"%{q}%"))
    if brand:
        query = query.filter(Product.brand == brand)
    if category_id is not None:
        query = query.filter(Product.category_id == category_id)
    if min_price is not None:
        query = query.filter(Product.base_price >= min_price)
    if max_price is not None:
        query = query.filter(Product.base_price <= max_price)
    if not include_inactive:
        query = query.filter(Product.is_active == True)
    products = [build_product_summary(session, p) for p in query.order_by(Product.id).all()]
    if in_stock:
        products = [p for p in products if p.total_stock > 0]
    session.close()
    return ProductList(products=products, count=len(products))


@app.get("/api/products/{product_id}", summary="Get product details", description="Get a product with its variants, prices, stock and rating summary.", tags=["catalog"], operation_id="get_product", response_model=ProductDetail)
async def get_product(product_id: int = Path(..., description="Product ID")):
    session = SessionLocal()
    product = session.query(Product).filter(Product.id == product_id).first()
    category = session.query(Category).filter(Category.id == product.category_id).first()
    variants = session.query(ProductVariant).filter(ProductVariant.product_id == product.id).order_by(ProductVariant.id).all()
    avg, count = rating_stats(session, product.id)
    result = ProductDetail(id=product.id, name=product.name, brand=product.brand, description=product.description, category_id=product.category_id, category_name=category.name, base_price=product.base_price, is_active=product.is_active, average_rating=avg, review_count=count, variants=[VariantOut.model_validate(v) for v in variants])
    session.close()
    return result


@app.get("/api/products/{product_id}/reviews", summary="List product reviews", description="List reviews of a product with its average rating, optionally filtered by minimum rating.", tags=["reviews"], operation_id="list_product_reviews", response_model=ReviewList)
async def list_product_reviews(product_id: int = Path(..., description="Product ID"), min_rating: Optional[int] = Query(None, description="Only reviews with at least this rating")):
    session = SessionLocal()
    product = session.query(Product).filter(Product.id == product_id).first()
    query = session.query(Review).filter(Review.product_id == product.id)
    if min_rating is not None:
        query = query.filter(Review.rating >= min_rating)
    rows = query.order_by(Review.created_at.desc()).all()
    avg, count = rating_stats(session, product.id)
    result = ReviewList(product_id=product.id, product_name=product.name, average_rating=avg, review_count=count, reviews=[ReviewOut.model_validate(r) for r in rows])
    session.close()
    return result


@app.post("/api/products/{product_id}/reviews", summary="Write a product review", description="Post a review with a 1-5 star rating for a product as the current user.", tags=["reviews"], operation_id="create_product_review", response_model=ReviewOut)
async def create_product_review(body: ReviewCreate, product_id: int = Path(..., description="Product ID")):
    session = SessionLocal()
    user_id = 1
    product = session.query(Product).filter(Product.id == product_id).first()
    review = Review(product_id=product.id, user_id=user_id, rating=body.rating, title=body.title, body=body.body, created_at=now_str())
    session.add(review)
    session.commit()
    result = ReviewOut.model_validate(review)
    session.close()
    return result


@app.get("/api/cart", summary="Get my cart", description="Show the current user's shopping cart with line totals and subtotal.", tags=["cart"], operation_id="get_cart", response_model=CartOut)
async def get_cart():
    session = SessionLocal()
    user_id = 1
    cart = get_or_create_cart(session, user_id)
    session.commit()
    result = build_cart(session, cart)
    session.close()
    return result


@app.post("/api/cart/items", summary="Add item to cart", description="Add units of a product variant to the current user's cart; adds to the quantity if already present.", tags=["cart"], operation_id="add_cart_item", response_model=CartItemOut)
async def add_cart_item(body: CartItemAdd):
    session = SessionLocal()
    user_id = 1
    cart = get_or_create_cart(session, user_id)
    item = session.query(CartItem).filter(CartItem.cart_id == cart.id, CartItem.variant_id == body.variant_id).first()
    if item is None:
        item = CartItem(cart_id=cart.id, variant_id=body.variant_id, quantity=body.quantity, added_at=now_str())
        session.add(item)
    else:
        item.quantity = item.quantity + body.quantity
    cart.updated_at = now_str()
    session.commit()
    result = build_cart_item(session, item)
    session.close()
    return result


@app.patch("/api/cart/items/{item_id}", summary="Change cart item quantity", description="Set a new quantity for an item in the current user's cart.", tags=["cart"], operation_id="update_cart_item", response_model=CartItemOut)
async def update_cart_item(body: CartItemUpdate, item_id: int = Path(..., description="Cart item ID")):
    session = SessionLocal()
    user_id = 1
    cart = session.query(Cart).filter(Cart.user_id == user_id).first()
    item = session.query(CartItem).filter(CartItem.id == item_id, CartItem.cart_id == cart.id).first()
    item.quantity = body.quantity
    cart.updated_at = now_str()
    session.commit()
    result = build_cart_item(session, item)
    session.close()
    return result


@app.delete("/api/cart/items/{item_id}", summary="Remove cart item", description="Remove an item from the current user's cart.", tags=["cart"], operation_id="remove_cart_item", response_model=DeleteResult)
async def remove_cart_item(item_id: int = Path(..., description="Cart item ID")):
    session = SessionLocal()
    user_id = 1
    cart = session.query(Cart).filter(Cart.user_id == user_id).first()
    item = session.query(CartItem).filter(CartItem.id == item_id, CartItem.cart_id == cart.id).first()
    removed_id = item.id
    session.delete(item)
    cart.updated_at = now_str()
    session.commit()
    session.close()
    return DeleteResult(id=removed_id, deleted=True)


@app.post("/api/cart/checkout", summary="Check out cart", description="Place an order from all items in the cart, shipping to one of my addresses with an optional coupon.", tags=["cart", "orders"], operation_id="checkout_cart", response_model=OrderDetail)
async def checkout_cart(body: CheckoutRequest):
    session = SessionLocal()
    user_id = 1
    cart = session.query(Cart).filter(Cart.user_id == user_id).first()
    address = session.query(Address).filter(Address.id == body.address_id, Address.user_id == user_id).first()
    rows = session.query(CartItem).filter(CartItem.cart_id == cart.id).order_by(CartItem.id).all()
    lines = []
    subtotal = 0.0
    for row in rows:
        variant = session.query(ProductVariant).filter(ProductVariant.id == row.variant_id).first()
        product = session.query(Product).filter(Product.id == variant.product_id).first()
        lines.append((row, variant, product))
        subtotal += variant.price * row.quantity
    subtotal = round(subtotal, 2)
    coupon = None
    discount = 0.0
    if body.coupon_code:
        coupon = session.query(Coupon).filter(Coupon.code == body.coupon_code).first()
        if coupon is not None and coupon.is_active and subtotal >= coupon.min_order_total:
            if coupon.discount_type == "percent":
                discount = round(subtotal * coupon.discount_value / 100.0, 2)
            else:
                discount = min(coupon.discount_value, subtotal)
        else:
            coupon = None
    shipping = 0.0 if subtotal >= 100 else 5.99
    total = round(subtotal - discount + shipping, 2)
    next_id = (session.query(func.max(Order.id)).scalar() or 0) + 1
    stamp = now_str()
    order = Order(id=next_id, order_number=f"PC-{1000 + next_id}", user_id=user_id, address_id=address.id, coupon_id=coupon.id if coupon else None, status="pending", subtotal=subtotal, discount_amount=discount, shipping_fee=shipping, total=total, placed_at=stamp, updated_at=stamp)
    session.add(order)
    session.flush()
    for row, variant, product in lines:
        session.add(OrderItem(order_id=order.id, variant_id=variant.id, product_name=product.name, quantity=row.quantity, unit_price=variant.price))
        variant.stock_quantity = variant.stock_quantity - row.quantity
        session.delete(row)
    cart.updated_at = stamp
    session.commit()
    result = build_order_detail(session, order)
    session.close()
    return result


@app.get("/api/orders", summary="List my orders", description="List the current user's orders, optionally filtered by status or order number.", tags=["orders"], operation_id="list_my_orders", response_model=OrderList)
async def list_my_orders(status: Optional[str] = Query(None, description="pending, paid, shipped, delivered or cancelled"), order_number: Optional[str] = Query(None, description="Exact order number such as PC-1003")):
    session = SessionLocal()
    user_id = 1
    query = session.query(Order).filter(Order.user_id == user_id)
    if status:
        query = query.filter(Order.status == status)
    if order_number:
        query = query.filter(Order.order_number == order_number)
    rows = query.order_by(Order.placed_at.desc()).all()
    result = OrderList(orders=[OrderSummary.model_validate(r) for r in rows])
    session.close()
    return result


@app.get("/api/orders/{order_id}", summary="Get order details", description="Get one of the current user's orders with its line items and coupon.", tags=["orders"], operation_id="get_order", response_model=OrderDetail)
async def get_order(order_id: int = Path(..., description="Order ID")):
    session = SessionLocal()
    user_id = 1
    order = session.query(Order).filter(Order.id == order_id, Order.user_id == user_id).first()
    result = build_order_detail(session, order)
    session.close()
    return result


@app.post("/api/orders/{order_id}/cancel", summary="Cancel an order", description="Cancel one of the current user's orders and put its items back in stock.", tags=["orders"], operation_id="cancel_order", response_model=OrderDetail)
async def cancel_order(order_id: int = Path(..., description="Order ID")):
    session = SessionLocal()
    user_id = 1
    order = session.query(Order).filter(Order.id == order_id, Order.user_id == user_id).first()
    if order.status != "cancelled":
        items = session.query(OrderItem).filter(OrderItem.order_id == order.id).all()
        for item in items:
            variant = session.query(ProductVariant).filter(ProductVariant.id == item.variant_id).first()
            variant.stock_quantity = variant.stock_quantity + item.quantity
        order.status = "cancelled"
        order.updated_at = now_str()
    session.commit()
    result = build_order_detail(session, order)
    session.close()
    return result


@app.get("/api/coupons/{code}", summary="Look up a coupon", description="Get the discount, minimum order total and validity dates of a coupon code.", tags=["coupons"], operation_id="get_coupon", response_model=CouponOut)
async def get_coupon(code: str = Path(..., description="Coupon code, e.g. SPRING15")):
    session = SessionLocal()
    coupon = session.query(Coupon).filter(Coupon.code == code).first()
    result = CouponOut.model_validate(coupon)
    session.close()
    return result


@app.get("/api/addresses", summary="List my addresses", description="List the current user's saved shipping addresses.", tags=["addresses"], operation_id="list_addresses", response_model=AddressList)
async def list_addresses():
    session = SessionLocal()
    user_id = 1
    rows = session.query(Address).filter(Address.user_id == user_id).order_by(Address.id).all()
    result = AddressList(addresses=[AddressOut.model_validate(r) for r in rows])
    session.close()
    return result


@app.post("/api/addresses", summary="Add an address", description="Save a new shipping address for the current user, optionally as the default.", tags=["addresses"], operation_id="create_address", response_model=AddressOut)
async def create_address(body: AddressCreate):
    session = SessionLocal()
    user_id = 1
    if body.is_default:
        for other in session.query(Address).filter(Address.user_id == user_id, Address.is_default == True).all():
            other.is_default = False
    address = Address(user_id=user_id, label=body.label, recipient_name=body.recipient_name, street=body.street, city=body.city, state=body.state, postal_code=body.postal_code, country=body.country, phone=body.phone, is_default=body.is_default, created_at=now_str())
    session.add(address)
    session.commit()
    result = AddressOut.model_validate(address)
    session.close()
    return result


@app.put("/api/addresses/{address_id}", summary="Update an address", description="Update fields of one of the current user's addresses; only provided fields change.", tags=["addresses"], operation_id="update_address", response_model=AddressOut)
async def update_address(body: AddressUpdate, address_id: int = Path(..., description="Address ID")):
    session = SessionLocal()
    user_id = 1
    address = session.query(Address).filter(Address.id == address_id, Address.user_id == user_id).first()
    changes = body.model_dump(exclude_unset=True, exclude_none=True)
    if changes.get("is_default"):
        for other in session.query(Address).filter(Address.user_id == user_id, Address.id != address.id, Address.is_default == True).all():
            other.is_default = False
    for key, value in changes.items():
        setattr(address, key, value)
    session.commit()
    result = AddressOut.model_validate(address)
    session.close()
    return result


@app.get("/api/returns", summary="List my returns", description="List the current user's return requests, optionally filtered by status.", tags=["returns"], operation_id="list_my_returns", response_model=ReturnList)
async def list_my_returns(status: Optional[str] = Query(None, description="requested, approved, rejected or refunded")):
    session = SessionLocal()
    user_id = 1
    query = session.query(ReturnRequest).filter(ReturnRequest.user_id == user_id)
    if status:
        query = query.filter(ReturnRequest.status == status)
    result = ReturnList(returns=[build_return(session, r) for r in query.order_by(ReturnRequest.id).all()])
    session.close()
    return result


@app.post("/api/returns", summary="Request a return", description="Request a return of units of an item from one of the current user's orders.", tags=["returns"], operation_id="create_return", response_model=ReturnOut)
async def create_return(body: ReturnCreate):
    session = SessionLocal()
    user_id = 1
    item = session.query(OrderItem).filter(OrderItem.id == body.order_item_id).first()
    ret = ReturnRequest(order_item_id=item.id, user_id=user_id, quantity=body.quantity, reason=body.reason, status="requested", refund_amount=round(item.unit_price * body.quantity, 2), requested_at=now_str())
    session.add(ret)
    session.commit()
    result = build_return(session, ret)
    session.close()
    return result


@app.get("/api/wishlist", summary="Get my wishlist", description="List the products saved in the current user's wishlist.", tags=["wishlist"], operation_id="list_wishlist", response_model=WishlistOut)
async def list_wishlist():
    session = SessionLocal()
    user_id = 1
    rows = session.query(WishlistItem).filter(WishlistItem.user_id == user_id).order_by(WishlistItem.id).all()
    result = WishlistOut(items=[build_wishlist_item(session, r) for r in rows])
    session.close()
    return result


@app.post("/api/wishlist", summary="Add to wishlist", description="Save a product to the current user's wishlist.", tags=["wishlist"], operation_id="add_to_wishlist", response_model=WishlistItemOut)
async def add_to_wishlist(body: WishlistAdd):
    session = SessionLocal()
    user_id = 1
    row = WishlistItem(user_id=user_id, product_id=body.product_id, added_at=now_str())
    session.add(row)
    session.commit()
    result = build_wishlist_item(session, row)
    session.close()
    return result


@app.delete("/api/wishlist/{item_id}", summary="Remove from wishlist", description="Remove an item from the current user's wishlist.", tags=["wishlist"], operation_id="remove_wishlist_item", response_model=DeleteResult)
async def remove_wishlist_item(item_id: int = Path(..., description="Wishlist item ID")):
    session = SessionLocal()
    user_id = 1
    row = session.query(WishlistItem).filter(WishlistItem.id == item_id, WishlistItem.user_id == user_id).first()
    removed_id = row.id
    session.delete(row)
    session.commit()
    session.close()
    return DeleteResult(id=removed_id, deleted=True)


if __name__ == "__main__":
    import uvicorn
    host = os.getenv("HOST", "127.0.0.1")
    port = int(os.getenv("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)
