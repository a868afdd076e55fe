from django.contrib import admin

from .models import Cabinet, Product


@admin.register(Cabinet)
class CabinetAdmin(admin.ModelAdmin):
    list_display = ["cabinet_id", "name", "owner", "created_at"]
    list_select_related = ["owner"]
    search_fields = ["=cabinet_id", "name", "owner__username"]
    raw_id_fields = ["owner"]


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ["product_id", "name", "owner", "created_at"]
    list_select_related = ["owner"]
    search_fields = ["=product_id", "name", "owner__username"]
    raw_id_fields = ["owner"]
