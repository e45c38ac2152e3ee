/*
 * private.c - libibverbs' private interface (IBVERBS_PRIVATE_34), for the
 * provider libraries programs link: perftest links Debian's libmlx5.so.1
 * and libefa.so.1, pyverbs' provider modules link them too, and they
 * import these symbols. Loading them must work; nothing reaches them,
 * since a provider only acts on devices of its own (libmlx5 checks the
 * device's ops, which softnic's device does not have): every command
 * answers EOPNOTSUPP, and a driver registering itself is ignored.
 * ibv_query_gid_type, the private call perftest makes, is device.c's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "softnic.h"

/* The commands take arguments these stubs ignore (the x86-64 and AArch64
 * calling conventions let a function ignore what it does not declare). */
#define CMD(name)                                                              \
	SN_EXPORT int name(void)                                               \
	{                                                                      \
		return EOPNOTSUPP;                                             \
	}

CMD(execute_ioctl)
CMD(ibv_cmd_advise_mr)
CMD(ibv_cmd_alloc_dm)
CMD(ibv_cmd_alloc_mw)
CMD(ibv_cmd_alloc_pd)
CMD(ibv_cmd_attach_mcast)
CMD(ibv_cmd_close_xrcd)
CMD(ibv_cmd_create_ah)
CMD(ibv_cmd_create_counters)
CMD(ibv_cmd_create_cq)
CMD(ibv_cmd_create_cq_ex)
CMD(ibv_cmd_create_flow)
CMD(ibv_cmd_create_flow_action_esp)
CMD(ibv_cmd_create_qp)
CMD(ibv_cmd_create_qp_ex2)
CMD(ibv_cmd_create_qp_ex)
CMD(ibv_cmd_create_rwq_ind_table)
CMD(ibv_cmd_create_srq)
CMD(ibv_cmd_create_srq_ex)
CMD(ibv_cmd_create_wq)
CMD(ibv_cmd_dealloc_mw)
CMD(ibv_cmd_dealloc_pd)
CMD(ibv_cmd_dereg_mr)
CMD(ibv_cmd_destroy_ah)
CMD(ibv_cmd_destroy_counters)
CMD(ibv_cmd_destroy_cq)
CMD(ibv_cmd_destroy_flow)
CMD(ibv_cmd_destroy_flow_action)
CMD(ibv_cmd_destroy_qp)
CMD(ibv_cmd_destroy_rwq_ind_table)
CMD(ibv_cmd_destroy_srq)
CMD(ibv_cmd_destroy_wq)
CMD(ibv_cmd_detach_mcast)
CMD(ibv_cmd_free_dm)
CMD(ibv_cmd_get_context)
CMD(ibv_cmd_modify_flow_action_esp)
CMD(ibv_cmd_modify_qp)
CMD(ibv_cmd_modify_qp_ex)
CMD(ibv_cmd_modify_srq)
CMD(ibv_cmd_modify_wq)
CMD(ibv_cmd_open_qp)
CMD(ibv_cmd_open_xrcd)
CMD(ibv_cmd_poll_cq)
CMD(ibv_cmd_post_recv)
CMD(ibv_cmd_post_send)
CMD(ibv_cmd_post_srq_recv)
CMD(ibv_cmd_query_context)
CMD(ibv_cmd_query_device)
CMD(ibv_cmd_query_device_any)
CMD(ibv_cmd_query_mr)
CMD(ibv_cmd_query_port)
CMD(ibv_cmd_query_qp)
CMD(ibv_cmd_query_srq)
CMD(ibv_cmd_read_counters)
CMD(ibv_cmd_reg_dm_mr)
CMD(ibv_cmd_reg_dmabuf_mr)
CMD(ibv_cmd_reg_mr)
CMD(ibv_cmd_req_notify_cq)
CMD(ibv_cmd_rereg_mr)
CMD(ibv_cmd_resize_cq)
CMD(ibv_cmd_modify_cq)

SN_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, const void *dev, const char *fmt, ...)
{
	errno = ENOENT;
	return -1;
}

SN_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link)
{
	return num_attrs;
}

SN_EXPORT void __verbs_log(void *ctx, int level, const char *fmt, ...)
{
}

SN_EXPORT void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t size, void *ctx,
					      uint32_t driver_id)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SN_EXPORT struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SN_EXPORT void verbs_register_driver_34(const void *ops)
{
}

SN_EXPORT void verbs_set_ops(void *vctx, const void *ops)
{
}

SN_EXPORT void verbs_uninit_context(void *vctx)
{
}

SN_EXPORT void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *ctx,
			     struct ibv_comp_channel *channel, void *cq_context)
{
}

SN_EXPORT bool verbs_allow_disassociate_destroy(int ret)
{
	return false;
}
